"""Every ```sh block of the README and of the documentation site (docs/*.md) runs as written, so
none rots (issue 23 item 3, issue 38 item 2): each in a temporary fleet (HERMES_HOME and
HERMES_ROOT set) with a fake HOME (so `hermes --install-completion` edits a throwaway ~/.bashrc,
never the real one), under bash, in a process group of its own that is killed afterwards (a block
may start a server with `&`). A block is skipped only when the page marks it, on the line before,
with `<!-- readme-test: not run (the reason) -->`. A block that appears word for word on two pages
(the README's tour and the getting-started page share some) runs once."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!-- readme-test: not run \((?P<reason>[^)]+)\) -->")
#: what a block's output must never contain: a command refused or broken as typed
BROKEN = ("Traceback", "hermes: error", "internal error", "command not found", "No such option",
          "unexpected extra argument", "Usage: hermes")


def sh_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(line number, body, the reason it is not run or None) of every ```sh block of `text`."""
    lines = text.splitlines()
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


def page_blocks() -> list[tuple[str, int, str, str | None]]:
    """(page, line, body, reason) of every sh block of every page, each distinct body once."""
    seen: set[str] = set()
    found = []
    for page in PAGES:
        for line, body, reason in sh_blocks(page.read_text(encoding="utf-8")):
            if body in seen:
                continue
            seen.add(body)
            found.append((str(page.relative_to(ROOT)), line, body, reason))
    return found


BLOCKS = page_blocks()
README_BLOCKS = sh_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_blocks_and_says_why_each_skipped_one_is_not_run():
    assert len(README_BLOCKS) >= 4
    skipped = [(line, reason) for line, _, reason in README_BLOCKS if reason is not None]
    assert all(reason.strip() for _, reason in skipped)
    assert len(skipped) <= 3, skipped  # the install line, the test suite, the docs build


def test_every_documentation_page_with_commands_has_blocks_that_run():
    """The site's shell examples run too (issue 38 item 2): every page but the reference ones
    has at least one block, and most blocks run."""
    reference = {"docs/cli.md", "docs/design.md", "docs/performance.md", "docs/python-api.md", "docs/index.md",
                 "docs/development.md"}
    pages = {page for page, _, _, _ in BLOCKS}
    missing = [str(p.relative_to(ROOT)) for p in PAGES[1:] if str(p.relative_to(ROOT)) not in pages | reference]
    assert not missing, missing
    skipped = [(page, line, reason) for page, line, _, reason in BLOCKS if reason is not None]
    assert all(reason.strip() for _, _, reason in skipped)
    assert len(skipped) * 3 <= len(BLOCKS), skipped


def test_a_marked_block_is_skipped_and_an_unmarked_one_is_not():
    text = ("<!-- readme-test: not run (needs a database) -->\n```sh\nhermes store init\n```\n\n"
            "```sh\nhermes status\n```\n")
    assert sh_blocks(text) == [(2, "hermes store init\n", "needs a database"), (6, "hermes status\n", None)]


def _hermes_bin() -> str:
    found = Path(sys.executable).parent / "hermes"
    if not found.exists():
        pytest.fail(f"the `hermes` console script is not next to {sys.executable} (pip install -e .)")
    return str(found.parent)


@pytest.mark.parametrize("page,line,body,reason", BLOCKS, ids=[f"{page}:{line}" for page, line, _, _ in BLOCKS])
def test_readme_sh_block_runs_as_written(tmp_path, page, line, body, reason):
    if reason is not None:
        pytest.skip(f"{page} line {line}: not run ({reason})")
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
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the block left running in the background
        proc.wait()
    assert proc.returncode == 0, f"{page} line {line} exited {proc.returncode}:\n{out}"
    broken = [word for word in BROKEN if word in out]
    assert not broken, f"{page} line {line}: {broken}:\n{out}"
    if "--install-completion" in body:
        assert "hermes" in (home / ".bashrc").read_text()  # the fake HOME's, as the page says
