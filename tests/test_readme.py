"""Every ```sh block of the README runs as written, so none rots (issue 23 item 3): each in a
temporary fleet (HERMES_HOME and HERMES_ROOT set) with a fake HOME (so `hermes
--install-completion` edits a throwaway ~/.bashrc, never the real one), under bash, in a process
group of its own that is killed afterwards (a block may start a server with `&`). A block is
skipped only when the README marks it, on the line before, with
`<!-- readme-test: not run (the reason) -->`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
NOT_RUN = re.compile(r"<!-- readme-test: not run \((?P<reason>[^)]+)\) -->")
#: what a block's output must never contain: a command refused or broken as typed
BROKEN = ("Traceback", "hermes: error", "internal error", "command not found", "No such option",
          "unexpected extra argument", "Usage: hermes")


def sh_blocks() -> list[tuple[int, str, str | None]]:
    """(line number, body, the reason it is not run or None) of every ```sh block."""
    lines = README.read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            before = next((line for line in reversed(lines[:start]) if line.strip()), "")
            marked = NOT_RUN.search(before)
            blocks.append((start + 1, "\n".join(lines[start + 1:j]) + "\n", marked["reason"] if marked else None))
            i = j
        i += 1
    return blocks


BLOCKS = sh_blocks()


def test_the_readme_has_blocks_and_says_why_each_skipped_one_is_not_run():
    assert len(BLOCKS) >= 10
    skipped = [(line, reason) for line, _, reason in BLOCKS if reason is not None]
    assert all(reason.strip() for _, reason in skipped)
    assert len(skipped) <= 4, skipped  # the install lines, the test suite, the remote database


def _hermes_bin() -> str:
    found = Path(sys.executable).parent / "hermes"
    if not found.exists():
        pytest.fail(f"the `hermes` console script is not next to {sys.executable} (pip install -e .)")
    return str(found.parent)


@pytest.mark.parametrize("line,body,reason", BLOCKS, ids=[f"line{line}" for line, _, _ in BLOCKS])
def test_readme_sh_block_runs_as_written(tmp_path, line, body, reason):
    if reason is not None:
        pytest.skip(f"README line {line}: not run ({reason})")
    home, fleet, work = tmp_path / "home", tmp_path / "fleet", tmp_path / "work"
    for path in (home, fleet, work):
        path.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "_TYPER"))}
    env.update(HOME=str(home), HERMES_HOME=str(fleet), HERMES_ROOT=str(fleet), SHELL="/bin/bash",
               PATH=_hermes_bin() + os.pathsep + env.get("PATH", ""))
    proc = subprocess.Popen(["bash", "-c", body], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what the block left running in the background
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, f"README line {line} exited {proc.returncode}:\n{out}"
    broken = [word for word in BROKEN if word in out]
    assert not broken, f"README line {line}: {broken}:\n{out}"
    if "--install-completion" in body:
        assert "hermes" in (home / ".bashrc").read_text()  # the fake HOME's, as the README says
