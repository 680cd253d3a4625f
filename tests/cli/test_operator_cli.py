"""What an operator meets at the command line (issues 9 and 15): `--profile` seen from that
profile, a broken store configuration that holds instead of crashing, escaped output, the
deadline a body could not parse, help, completion and refused input. Real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import SRC, Hermes, InProcessHermes

from hermes_estop import Estop
from hermes_estop.consumers.cron import CronTable
from hermes_estop.model.timeutil import utc_now
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

ESC_REASON = "pwn\x1b[2J\x1b]0;title\x07 \u202egnp.exe"
RAW = ("\x1b", "\u202e", "\x07")


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def assert_escaped(text: str) -> None:
    for ch in RAW:
        assert ch not in text, text
    assert "\\x1b" in text and "\\u202e" in text, text


@pytest.fixture
def fleet(tmp_path) -> InProcessHermes:
    """`hermes` whose home is the fleet root, run in this process."""
    return InProcessHermes(tmp_path / "fleet")


# -- issue 9 item 5: --profile NAME is "seen from that profile" ---------------------------------

def write_profile_hold(root: Path, profile: str, body: str = "{}") -> Path:
    home = root / "profiles" / profile
    home.mkdir(parents=True, exist_ok=True)
    (home / "ESTOP").write_text(body)
    return home


@pytest.mark.parametrize("hot_path", [True, False])
def test_check_and_gate_with_profile_see_that_profiles_hold_from_the_fleet_root(fleet, hot_path):
    write_profile_hold(fleet.root, "ops", '{"reason": "ops maintenance"}')
    extra = [] if hot_path else ["--json"]  # --json on check, a malformed gate: both entry paths
    fleet("check", *extra, check=0)  # the fleet root's own view: no hold there
    held = fleet("check", "--profile", "ops", *extra, check=1)
    assert "ops maintenance" in held.stdout
    fleet("check", "--profile", "dev", *extra, check=0)
    fleet("gate", "--profile", "ops", "--", "true", check=75)
    fleet("gate", "--profile", "dev", "--", "true", check=0)


def test_check_with_profile_answers_what_the_consumers_gate_answers(fleet):
    from hermes_estop import Estop

    write_profile_hold(fleet.root, "ops", '{"allow": {"user_ids": ["42"]}}')
    consumers_view = Estop(home=fleet.root).for_profile("ops")
    for user in ("42", "7"):
        expected = 0 if consumers_view.gate(user, "ops") else 1
        fleet("check", "--user", user, "--profile", "ops", check=expected)
    assert fleet("check", "--user", "42", "--profile", "ops").returncode == 0
    assert fleet("check", "--user", "7", "--profile", "ops").returncode == 1


def test_a_fleet_root_hold_holds_every_profile_view(fleet):
    fleet("pause", "--reason", "everyone", check=0)
    assert "everyone" in fleet("check", "--profile", "ops", check=1).stdout


@pytest.mark.parametrize("args", [
    ["check", "--user", ""],
    ["check", "--profile", "../x"],
    ["check", "--profile", "fleet"],
    ["check", "--user", "a\u202eb"],
    ["gate", "--profile", "../x", "--", "true"],
    ["gate", "--user", "", "--", "true"],
])
def test_check_and_gate_refuse_ids_and_profiles_as_writes_do(fleet, args):
    line = one_error_line(fleet(*args, check=2))
    assert "invalid" in line and "\u202e" not in line


# -- issue 9 item 11 / 12, issue 15 item 7: the store configuration -----------------------------

def _not_utf8(path: Path) -> None:
    path.write_bytes(b'store = "\xff\xfe"\n')


def _bad_toml(path: Path) -> None:
    path.write_text("store = [unterminated")


def _directory(path: Path) -> None:
    path.mkdir()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _not_a_string(path: Path) -> None:
    path.write_text("store = 5\n")


BROKEN_CONFIGS = {"not-utf8": _not_utf8, "bad-toml": _bad_toml, "directory": _directory, "fifo": _fifo,
                  "not-a-string": _not_a_string}


@pytest.mark.parametrize("kind", sorted(BROKEN_CONFIGS))
def test_a_config_that_cannot_be_read_holds_the_fleet(fleet, kind):
    fleet.root.mkdir(parents=True)
    BROKEN_CONFIGS[kind](fleet.root / "estop.toml")
    held = fleet("check", check=1, timeout=30)
    assert "estop.toml" in held.stdout and "Traceback" not in held.stderr
    assert "estop.toml" in one_error_line(fleet("gate", "--", "true", check=75, timeout=30))
    fleet("gate", "--held-exit", "3", "--", "true", check=3, timeout=30)
    status = json.loads(fleet("status", "--json", check=0, timeout=30).stdout)
    assert status["engaged"] is True


@pytest.mark.parametrize("kind", sorted(BROKEN_CONFIGS))
@pytest.mark.parametrize("write", [["pause", "--reason", "x"], ["resume"], ["resume", "--fleet"]])
def test_a_write_with_a_broken_config_is_one_line_exit_2(fleet, kind, write):
    fleet.root.mkdir(parents=True)
    BROKEN_CONFIGS[kind](fleet.root / "estop.toml")
    line = one_error_line(fleet(*write, check=2, timeout=30))
    assert "estop.toml" in line
    assert not (fleet.root / "ESTOP").exists()


@pytest.mark.parametrize("kind", sorted(BROKEN_CONFIGS))
def test_the_library_never_raises_nor_hangs_on_a_broken_config(fleet, kind):
    fleet.root.mkdir(parents=True)
    BROKEN_CONFIGS[kind](fleet.root / "estop.toml")
    script = (
        "import hermes_estop\n"
        "from hermes_estop import Estop\n"
        "estop = Estop()\n"
        "verdict = estop.gate('42', None)\n"
        "assert not verdict and 'estop.toml' in verdict.notice, verdict.notice\n"
        "assert not hermes_estop.gate('42')\n"
        "assert hermes_estop.is_engaged()\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=fleet.env, capture_output=True, text=True,
                            timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_an_unknown_config_key_is_warned_about_by_name_once(fleet):
    fleet.root.mkdir(parents=True)
    (fleet.root / "estop.toml").write_text('store = "file"\nstroe = "postgresql://x"\n')
    result = fleet("check", check=0)
    assert result.stderr.count("stroe") == 1, result.stderr
    script = ("from hermes_estop import Estop\n"
              "for _ in range(3):\n"
              "    Estop().gate()\n")
    lib = subprocess.run([sys.executable, "-c", script], env=fleet.env, capture_output=True, text=True, timeout=30)
    assert lib.returncode == 0 and lib.stderr.count("'stroe'") == 1, lib.stderr


def test_a_store_option_that_is_not_a_store_is_refused_in_one_line(fleet):
    line = one_error_line(fleet("--store", "carrier-pigeon://nest", "check", check=2))
    assert "carrier-pigeon" in line


# -- issue 9 item 14: escaped human output, exact JSON ------------------------------------------

def test_a_hand_written_reason_with_escapes_is_escaped_everywhere_but_json(fleet):
    fleet.root.mkdir(parents=True)
    body = {"generation": "g\x1b[1m\u202e", "reason": ESC_REASON, "armed_by": "ev\x1bil",
            "allow": {"user_ids": ["ok"]}}
    (fleet.root / "ESTOP").write_text(json.dumps(body))
    assert_escaped(fleet("status", check=0).stdout)
    assert_escaped(fleet("check", check=1).stdout)
    assert_escaped(fleet("check", "--profile", "ops", check=1).stdout)
    assert_escaped(one_error_line(fleet("gate", "--", "true", check=75)))
    data = json.loads(fleet("status", "--json", check=0).stdout)
    assert data["holds"][0]["reason"] == ESC_REASON
    assert data["holds"][0]["generation"] == body["generation"]
    assert json.loads(fleet("check", "--json", check=1).stdout)["reason"] == ESC_REASON


def test_pause_and_resume_output_escape_the_reason(fleet):
    assert_escaped(fleet("pause", "--reason", ESC_REASON, check=0).stdout)
    assert json.loads(fleet("status", "--json").stdout)["holds"][0]["reason"] == ESC_REASON
    fleet("resume", check=0)


def test_history_escapes_actor_detail_and_reason_and_counts_corrupt_lines(fleet):
    fleet("pause", "--reason", "first", check=0)
    audit = fleet.root / "estop-audit.jsonl"
    event = {"time": "2026-12-01T00:00:00+00:00", "event": "skip", "location": "fleet\x1b[0m",
             "generation": None, "actor": "mallory\x1b]0;x\x07@host\u202e", "reason": ESC_REASON,
             "deadline": None, "detail": "det\x1b[31mail\u202e"}
    with audit.open("a") as handle:
        handle.write(json.dumps(event) + "\n")
        handle.write("this is not json\n")
        handle.write('{"half": \n')
    text = fleet("history", check=0).stdout
    assert_escaped(text)
    assert "2 corrupt audit line(s) skipped" in text
    events = json.loads(fleet("history", "--json", check=0).stdout)
    assert any(e["actor"] == event["actor"] and e["detail"] == event["detail"] for e in events)


# -- issue 15 items 1 and 2: the notice names the cause; an unparsable deadline is flagged ------

def test_a_garbage_deadline_is_flagged_in_status_text_and_json(fleet):
    fleet.root.mkdir(parents=True)
    (fleet.root / "ESTOP").write_text('{"expires_at": "garbage"}')
    text = fleet("status", check=0).stdout
    assert "deadline unreadable: held until resumed" in text
    assert "deadline   none" not in text
    hold = json.loads(fleet("status", "--json", check=0).stdout)["holds"][0]
    assert hold["state"] == "active" and hold["problem"] == "deadline unreadable: held until resumed"
    fleet("check", check=1)


@pytest.mark.parametrize("make", ["directory", "empty"])
def test_check_gate_and_status_name_the_cause_of_an_unreadable_hold(fleet, make):
    fleet.root.mkdir(parents=True)
    sentinel = fleet.root / "ESTOP"
    if make == "directory":
        sentinel.mkdir()
    else:
        sentinel.write_text("")
    expected = "remove it by hand" if make == "directory" else "a hand-made stop with no details"
    assert expected in fleet("check", check=1).stdout
    assert expected in one_error_line(fleet("gate", "--", "true", check=75))
    assert expected in fleet("status", check=0).stdout


def test_resume_on_a_directory_sentinel_says_what_to_do_in_one_line(fleet):
    fleet.root.mkdir(parents=True)
    (fleet.root / "ESTOP").mkdir()
    line = one_error_line(fleet("resume", check=2))
    assert "remove it by hand" in line and str(fleet.root / "ESTOP") in line


def test_resume_with_an_unreachable_store_says_what_to_do_in_one_line(fleet):
    line = one_error_line(fleet("--store", "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1", "resume",
                                check=2, timeout=60))
    assert "hermes store status" in line


# -- issue 15 item 7: blank reason ----------------------------------------------------------------

def test_a_blank_reason_is_refused_and_the_standing_one_kept(fleet):
    fleet("pause", "--reason", "db migration", check=0)
    assert "blank" in one_error_line(fleet("pause", "--reason", "   ", check=2))
    assert json.loads(fleet("status", "--json").stdout)["holds"][0]["reason"] == "db migration"
    fleet("pause", "--reason", "", check=0)  # explicitly empty: clears it
    assert json.loads(fleet("status", "--json").stdout)["holds"][0]["reason"] is None


# -- issue 15 item 4: help ------------------------------------------------------------------------

def test_bare_hermes_prints_the_normal_help(fleet):
    result = fleet()
    assert result.returncode == 0 and result.stderr == ""  # asking what there is is not an error
    shown = result.stdout
    assert shown.startswith("Usage: hermes") and "\nCommands:\n" in shown
    assert "error" not in shown.splitlines()[0]
    assert len(shown.splitlines()) > 10


def _all_commands() -> list[list[str]]:
    import typer

    from hermes_estop.cli.application import _walk, build_app

    return [list(path) for path, _ in _walk(typer.main.get_command(build_app()))]


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p) or "hermes")
def test_dash_h_is_help_everywhere_and_metavars_are_words(fleet, path):
    result = fleet(*path, "-h", check=0)
    assert result.stdout.startswith("Usage: hermes")
    assert "<" not in result.stdout.replace("<=", ""), result.stdout
    assert "list[" not in result.stdout


def test_the_value_words_of_the_hold_commands(fleet):
    pause = fleet("pause", "-h", check=0).stdout
    for word in ("--allow-user ID", "--allow-profile NAME", "--ttl DUR", "--until TIME", "--reason TEXT"):
        assert word in pause
    assert "--held-exit CODE" in fleet("gate", "-h", check=0).stdout


# -- issue 15 item 5: completion ------------------------------------------------------------------

def _complete(hermes: Hermes, shell: str, words: str) -> subprocess.CompletedProcess:
    env = dict(hermes.env, _HERMES_COMPLETE=f"complete_{shell}")
    if shell == "bash":
        env.update(COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    else:
        env.update(_TYPER_COMPLETE_ARGS=words)
        if shell == "fish":
            env["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    return subprocess.run([sys.executable, "-m", "hermes_estop"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_offers_window_and_job_names(fleet, shell):
    # written through the library (what `windows add` and `cron add` call): completion is the test
    fleet.home.mkdir(parents=True)
    for name, cron in (("nightly", "0 2 * * *"), ("noon", "0 12 * * *")):
        WindowsFile(fleet.home).add(Window.parse({"name": name, "cron": cron, "duration": "1h"}))
    CronTable.of(Estop(home=fleet.home, root=fleet.root)).add("backup", "true", now=utc_now(), schedule="0 3 * * *")
    words = "hermes windows remove " if shell == "bash" else "hermes windows remove n"
    result = _complete(fleet, shell, words)
    assert result.returncode == 0, result.stderr
    assert "nightly" in result.stdout and "noon" in result.stdout
    jobs = _complete(fleet, shell, "hermes cron remove " if shell == "bash" else "hermes cron remove b")
    assert "backup" in jobs.stdout
    commands = _complete(fleet, shell, "hermes " if shell == "bash" else "hermes w")
    assert "windows" in commands.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_script_can_be_shown_for_each_shell(fleet, shell):
    env = dict(fleet.env, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1", SHELL=f"/bin/{shell}")
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "--show-completion", shell], env=env,
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "_HERMES_COMPLETE" in result.stdout


# -- issue 15 "Done when": the command reference is `hermes --help`'s list; since issue 38 the
# reference is the documentation site's CLI page, generated from the app (docs/hooks/cli_reference.py)

def test_the_cli_reference_lists_exactly_the_commands_of_hermes_help(fleet):
    import importlib.util
    import re

    help_text = fleet("--help", check=0).stdout
    listed = re.findall(r"^  (\w+)\s", help_text.split("Commands:", 1)[1], flags=re.MULTILINE)
    spec = importlib.util.spec_from_file_location("cli_reference", Path(SRC).parent / "docs" / "hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    documented = re.findall(r"^## hermes (\w+)$", hook.reference_markdown(), flags=re.MULTILINE)
    assert sorted(documented) == sorted(listed)
    assert len(listed) >= 10


def test_store_status_with_a_broken_config_names_it_and_exits_1(fleet):
    fleet.root.mkdir(parents=True)
    (fleet.root / "estop.toml").write_bytes(b"store = \xff\n")
    result = fleet("store", "status", check=1)
    assert "estop.toml" in result.stdout


@pytest.mark.parametrize("flag", ["--allow-user", "--allow-profile"])
def test_pause_refuses_an_id_with_a_bidi_override_and_shows_it_escaped(fleet, flag):
    args = ["--allow-user", "42"] if flag == "--allow-profile" else []
    line = one_error_line(fleet("pause", *args, flag, "adm\u202enimda", check=2))
    assert "\\u202e" in line and "\u202e" not in line
    assert not (fleet.root / "ESTOP").exists()


def test_the_notify_tables_are_a_known_config_key(fleet):
    fleet.root.mkdir(parents=True)
    (fleet.root / "estop.toml").write_text('store = "file"\n\n[[notify]]\nname = "pager"\n')
    assert "unknown key" not in fleet("check", check=0).stderr
