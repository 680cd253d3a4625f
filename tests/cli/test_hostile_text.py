"""Every human-facing command over a fleet full of hostile text (issue 20 item 10): hold reasons
and allowlisted ids, window names and reasons, cron job names and results, kanban card titles and
results, notify targets' errors, gateway turn ids, audit entries. No command may print a raw
C0/C1 control character or a bidirectional override: each goes through `text.printable`.

The command list is the parametrize table below: a new human-facing command is covered by adding
its line. `--json` output is not scanned: it keeps exact values, JSON-escaped."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

import inprocess_cli
from hermes_estop import Estop
from hermes_estop.consumers.board import Board
from hermes_estop.consumers.cron import Claim, CronTable
from hermes_estop.consumers.turns import TURNS_DIR
from hermes_estop.consumers.worker import WorkResult
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.timeutil import utc_now
from hermes_estop.notify.cursors import FleetCursorStore, TargetState
from hermes_estop.system.processes import start_time
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home

#: ESC sequences (clear screen, an OSC window title), BEL, a C1 CSI, a right-to-left override
HOSTILE = "\x1b[2J\x07\x1b]0;owned\x07\x9b31m\u202eevil"
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _toml(text: str) -> str:
    """`text` as a TOML basic string (every control character escaped)."""
    return json.dumps(text)


@pytest.fixture(params=["valid windows", "broken windows"])
def hostile_fleet(fleet: Path, request: pytest.FixtureRequest) -> Path:
    """A fleet root where every free-text field a person reads carries `HOSTILE`; its
    windows.toml is valid (a window's reason), or refused for a window's name."""
    estop = Estop(home=fleet)
    now = utc_now()
    estop.engage(reason=f"upgrade {HOSTILE}", ttl="2h")
    (fleet / "windows.toml").write_text(
        f'[[windows]]\nname = "nightly"\ncron = "0 2 * * *"\ntimezone = "UTC"\nduration = "1h"\n'
        f"reason = {_toml(HOSTILE)}\n\n"
        + (f'[[windows]]\nname = {_toml("bad" + HOSTILE)}\ncron = "0 3 * * *"\nduration = "1h"\n'
           if request.param == "broken windows" else ""))
    table = CronTable(fleet)
    table.add("backup", f"echo {HOSTILE}", now=now - timedelta(minutes=3), schedule="* * * * *")
    table.add("running", "true", now=now - timedelta(minutes=3), schedule="* * * * *")
    with table.edit() as jobs:
        jobs[0] = replace(jobs[0], name=f"job{HOSTILE}", last=WorkResult("failed", 1, now, now, HOSTILE))
        jobs[1] = replace(jobs[1], name=f"run{HOSTILE}", claim=Claim(f"t{HOSTILE}", now, now + timedelta(hours=1),
                                                                     os.getpid()))
    board = Board(fleet)
    card = board.add(f"card {HOSTILE}", "true", ready=True)
    board.claim(card.id, "c", now, now + timedelta(hours=1))
    board.finish(card.id, "c", WorkResult("failed", 1, now, now, f"detail {HOSTILE}"))
    board.add(f"ready {HOSTILE}", "true", ready=True)
    (fleet / "estop.toml").write_text('[[notify]]\nname = "hook"\ntype = "webhook"\nurl = "http://127.0.0.1:9/"\n')
    FleetCursorStore(Fleet.of_files(fleet)).save("hook", TargetState(position=0, source="file", failures=1,
                                                    last_error=f"HTTP 500 {HOSTILE}"))
    turns = fleet / TURNS_DIR
    turns.mkdir()
    (turns / f"turns-{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "start": start_time(os.getpid()),
         "turns": {f"turn{HOSTILE}": {"user": f"user{HOSTILE}", "profile": None, "since": None}}}))
    return fleet


COMMANDS = [
    ("status",),
    ("check",),
    ("check", "--at", "now", "--for", "3h"),
    ("gate", "--", "true"),
    ("history",),
    ("pause", "--reason", f"again {HOSTILE}"),
    ("resume",),
    ("drain", "--timeout", "1s"),
    ("windows", "list"),
    ("windows", "next"),
    ("windows", "explain", "nightly"),
    ("windows", "timeline"),
    ("windows", "validate"),
    ("windows", "skip", "nightly"),
    ("cron", "list"),
    ("cron", "tick"),
    ("kanban", "list"),
    ("kanban", "dispatch"),
    ("notify", "status"),
    ("notify", "test"),
    ("store", "status"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_no_command_prints_a_raw_control_character_or_bidi_override(hostile_fleet, capsys, argv):
    _, out, err = run(capsys, *argv)
    raw = sorted({f"U+{ord(ch):04X}" for ch in _RAW.findall(out + err)})
    assert not raw, f"hermes {' '.join(argv)} printed {raw} raw:\n{out}{err}"


def test_the_hostile_text_reaches_the_output_escaped(hostile_fleet, capsys):
    """The scan above is not vacuous: the fleet's hostile text is shown, escaped."""
    _, out, _ = run(capsys, "status")
    assert "upgrade \\x1b[2J\\x07\\x1b]0;owned\\x07\\x9b31m\\u202eevil" in out


@pytest.mark.parametrize("argv", [("windows", "list"), ("windows", "next"), ("windows", "explain", "w1"),
                                  ("windows", "validate")], ids=" ".join)
def test_a_refusal_that_reaches_main_is_printed_escaped(fleet, capsys, argv):
    """A refusal no command catches (`main` prints it: an unreadable `exclude_calendar` whose
    name carries hostile text) is one line, exit 2, with the text escaped."""
    (fleet / "windows.toml").write_text(f'[[windows]]\nname = "w1"\ncron = "0 2 * * *"\nduration = "1h"\n'
                                        f"exclude_calendar = {_toml('h' + HOSTILE + '.ics')}\n")
    code, out, err = run(capsys, *argv)
    raw = sorted({f"U+{ord(ch):04X}" for ch in _RAW.findall(out + err)})
    assert (code, raw) == (2, []), f"hermes {' '.join(argv)} exited {code}, printed {raw} raw:\n{out}{err}"
    assert "\\x1b[2J" in err and err.count("\n") == 1
