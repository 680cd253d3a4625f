"""`hermes --server URL` against a real `hermes serve --http-write` over TLS: pause, status,
resume and windows skip act on the server's fleet with the local exit statuses; a refused or
unreachable server is exit 2 with one line and nothing is written on the calling host."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from api_helpers import SRC, caller_command, hermes, make_token, self_signed, serve

from hermes_estop import Estop
from hermes_estop.api.limits import RateLimiter
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.windows.ledger import skipped_keys
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile
from inprocess_cli import completed

#: a nightly window that never covers the test run: it starts twelve hours from now (the tests
#: must not pass or fail by the hour they run at)
NIGHTLY = {"name": "nightly", "cron": f"0 {(datetime.now(UTC).hour + 12) % 24} * * *", "timezone": "UTC", "duration": "2h"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("server")
    WindowsFile(root).save([Window.parse(NIGHTLY)])
    caller = tmp_path_factory.mktemp("caller")
    for name, role in (("ops", "operator"), ("watch", "viewer")):
        (caller / name).write_text(make_token(root, name, role) + "\n")
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    with serve(root, "--http-write", "--tls-cert", str(cert), "--tls-key", str(key), cafile=cert) as served:
        yield root, caller, served.url.rstrip("/"), cert


@pytest.fixture(autouse=True)
def no_hold(request: pytest.FixtureRequest) -> None:
    if "site" in request.fixturenames:
        root = request.getfixturevalue("site")[0]
        files = Fleet.of_files(root)
        files.release_all(files.fleet_location)


#: the server's write limit per token (`api.routes`: a burst of 30, one a second after), kept by
#: the caller with room to spare: a command run in this process writes faster than a process
#: started per command did, and these tests share one server
_WRITES = RateLimiter(per_second=1.0, burst=20)
_WRITE_WORDS = frozenset({"pause", "resume", "skip", "unskip"})


def remote(site, *args: str, token: str = "ops", via_env: bool = False) -> subprocess.CompletedProcess[str]:
    """`hermes --server URL --token-file F ARGS` from a home of its own (never the server's), run
    in this process (`completed`: the command's output and exit code are what is checked); a
    write waits for the server's rate limit to allow it."""
    _, home, url, cert = site
    while not _WRITE_WORDS.isdisjoint(args) and not _WRITES.allow(token):
        time.sleep(0.1)
    env, prefix = caller_command(home, url, cert, home / token, via_env=via_env)
    return completed(env, *prefix[3:], *args)  # the options after `python -m hermes_estop`


@pytest.mark.parametrize("via_env", [False, True])
def test_a_remote_pause_and_resume_act_on_the_servers_fleet(site, via_env):
    root, caller = site[0], site[1]
    paused = remote(site, "pause", "--reason", "from the laptop", "--ttl", "30m", via_env=via_env)
    assert paused.returncode == 0 and "from the laptop" in paused.stdout
    assert hermes(root, "check", check=False).returncode == 1
    status = remote(site, "status", "--json", via_env=via_env)
    assert status.returncode == 0 and json.loads(status.stdout)["engaged"] is True
    assert "from the laptop" in remote(site, "status", via_env=via_env).stdout
    resumed = remote(site, "resume", via_env=via_env)
    assert resumed.returncode == 0
    assert hermes(root, "check", check=False).returncode == 0
    assert not (caller / "ESTOP").exists()


def test_a_stale_generation_is_exit_1_and_the_hold_stands(site):
    root = site[0]
    assert remote(site, "pause", "--reason", "one").returncode == 0
    result = remote(site, "resume", "--generation", "0" * 32)
    assert result.returncode == 1 and f"generation {'0' * 32} is not the current hold at fleet" in result.stderr
    assert hermes(root, "check", check=False).returncode == 1


def test_a_remote_skip_is_recorded_by_the_server_as_the_token(site):
    root = site[0]
    result = remote(site, "windows", "skip", "nightly")
    assert result.returncode == 0 and "skipped window nightly" in result.stdout
    events, _ = Fleet.of_files(root).history()
    assert events[-1].event == "skip" and events[-1].actor.startswith("token:ops from 127.0.0.1")
    hermes(root, "windows", "unskip", "nightly")


@pytest.mark.parametrize(("args", "token", "expected"), [
    (("pause", "--reason", "x"), "watch", "403"),
    (("pause", "--ttl", "soon"), "ops", "--ttl: invalid duration 'soon'"),
    (("pause", "--until", "2099-01-01T00:00:00Z"), "ops", "more than 366 days ahead"),
    (("windows", "skip", "no-such-window"), "ops", "404"),
])
def test_a_refused_request_is_exit_2_with_one_line(site, args, token, expected):
    result = remote(site, *args, token=token)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and expected in result.stderr
    assert hermes(site[0], "check", check=False).returncode == 0


def test_an_unreachable_server_is_exit_2_and_nothing_is_written_locally(tmp_path):
    (tmp_path / "token").write_text("hme_x\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(tmp_path), HERMES_ROOT=str(tmp_path), PYTHONPATH=SRC)
    with __import__("socket").socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    result = subprocess.run([sys.executable, "-m", "hermes_estop", "--server", f"http://127.0.0.1:{port}",
                             "--token-file", str(tmp_path / "token"), "pause", "--reason", "x"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "cannot reach server" in result.stderr
    assert not (tmp_path / "ESTOP").exists()


def test_a_server_without_a_token_file_is_exit_2(tmp_path: Path):
    result = hermes(tmp_path, "--server", "http://127.0.0.1:1", "status", check=False)
    assert result.returncode == 2 and "--token-file" in result.stderr


# -- parity: the same command on the same fleet prints the same, locally and over --server ---

_GENERATION = re.compile(r"\b[0-9a-f]{32}\b")
_SCOPED_ID = re.compile(r"\b[0-9a-f]{8}\b")
_INSTANT = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
_RELATIVE = re.compile(r"\b(in|ago) [0-9hmsd ]+\b|\b[0-9hmsd]+ ago\b")
_ACTOR = re.compile(r"(armed by   |\"armed_by\": \")(token:ops|[^\s\"]+@[^\s\"]+)")


def normalised(text: str) -> str:
    """`text` without what differs between two runs of one command: generations and scoped hold
    ids (random), instants and countdowns (the clock moved), and who armed (the local actor or
    the token)."""
    for pattern, stand_in in ((_GENERATION, "GEN"), (_INSTANT, "TIME"), (_RELATIVE, "REL")):
        text = pattern.sub(stand_in, text)
    text = _SCOPED_ID.sub("ID", text)
    return _ACTOR.sub(lambda m: m.group(1) + "ACTOR", text)


def arm(root: Path, scope: str, reason: str, ttl: str | None = None, allow: dict[str, list[str]] | None = None,
        only: list[str] | None = None) -> None:
    """A setup's pause as the server arms it for the operator token (its body and its audit
    actor), through the library: the parity checked is the command's, not the set-up's."""
    request, now = Estop(root=root, home=root).engage_request(reason, allow, ttl, armed_by="token:ops", only=only)
    fleet = Fleet.of_files(root, actor="token:ops from 127.0.0.1")
    fleet.engage(fleet.location(scope), request, now)


def both_ways(site, setup: list[tuple[str, ...]], args: tuple[str, ...]) -> tuple[tuple[int, str, str], ...]:
    """(exit, stdout, stderr) of `hermes ARGS` on the server's fleet run locally, then over
    --server, each after the same `setup`: its pauses armed as the server arms them for the
    operator token (`ARMED`), anything else asked of the server."""
    root = site[0]
    runs = []
    for run in (lambda *a: hermes(root, *a, check=False), lambda *a: remote(site, *a)):
        files = Fleet.of_files(root)
        for scope in files.scopes():
            files.release_all(scope)
        if skipped_keys(files):
            hermes(root, "windows", "unskip", "nightly")
        for step in setup:
            if step in ARMED:
                arm(root, **ARMED[step])
            else:
                assert remote(site, *step).returncode == 0
        done = run(*args)
        runs.append((done.returncode, normalised(done.stdout), normalised(done.stderr)))
    return tuple(runs)


PAUSED = ("pause", "--fleet", "--reason", "db migration", "--ttl", "30m", "--allow-user", "alice")
SCOPED = ("pause", "--fleet", "--reason", "cron only", "--only", "cron")
PROFILE = ("pause", "--profile", "ops", "--reason", "ops only", "--ttl", "2h")
#: what each of those pauses arms (`arm`'s arguments)
ARMED: dict[tuple[str, ...], dict[str, Any]] = {
    PAUSED: {"scope": "fleet", "reason": "db migration", "ttl": "30m", "allow": {"user_ids": ["alice"]}},
    SCOPED: {"scope": "fleet", "reason": "cron only", "only": ["cron"]},
    PROFILE: {"scope": "ops", "reason": "ops only", "ttl": "2h"},
}

PARITY = {
    "status, free": ([], ("status",)),
    "status, held": ([PAUSED, SCOPED], ("status",)),
    "status, a profile held elsewhere": ([PROFILE], ("status",)),
    "pause": ([], PAUSED),
    "pause, a scoped hold beside a full one": ([PAUSED], SCOPED),
    "pause --profile": ([PAUSED], PROFILE),
    "pause, a refused deadline": ([], ("pause", "--fleet", "--until", "2099-01-01T00:00:00Z")),
    "pause, a refused duration": ([], ("pause", "--fleet", "--ttl", "soon")),
    "resume": ([PAUSED, SCOPED], ("resume", "--fleet")),
    "resume, nothing stands": ([], ("resume", "--fleet")),
    "resume, only scoped holds stand": ([SCOPED], ("resume", "--fleet")),
    "resume --hold of none": ([PAUSED], ("resume", "--fleet", "--hold", "deadbeef")),
    "resume --generation of another": ([PAUSED], ("resume", "--fleet", "--generation", "0" * 32)),
    "resume --all": ([PAUSED, SCOPED], ("resume", "--fleet", "--all")),
    "resume --profile": ([PAUSED, PROFILE], ("resume", "--profile", "ops")),
    "windows skip": ([], ("windows", "skip", "nightly")),
    "windows unskip": ([("windows", "skip", "nightly")], ("windows", "unskip", "nightly")),
    "windows list": ([], ("windows", "list")),
    "windows next": ([], ("windows", "next")),
    "windows next NAME -n 3, one skipped": ([("windows", "skip", "nightly")], ("windows", "next", "nightly", "-n", "3")),
    "check, free": ([], ("check",)),
    "check, held": ([PAUSED], ("check",)),
    "check, a scoped hold and other work": ([SCOPED], ("check", "--component", "kanban")),
    "check, admitted": ([PAUSED], ("check", "--user", "alice")),
}


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("setup", "args"), list(PARITY.values()), ids=list(PARITY))
def test_a_remote_command_prints_and_exits_as_the_local_one(site, setup, args, as_json):
    local, over_server = both_ways(site, setup, (*args, "--json") if as_json else args)
    assert over_server == local
    if as_json and local[1]:
        assert json.loads(over_server[1]) == json.loads(local[1])


def test_a_remote_resume_all_lifts_every_hold_at_the_scope(site):
    root = site[0]
    for step in (PAUSED, SCOPED):
        assert remote(site, *step).returncode == 0
    result = remote(site, "resume", "--fleet", "--all")
    assert result.returncode == 0 and result.stdout.count("resumed fleet") == 2
    assert hermes(root, "check", check=False).returncode == 0


def test_a_remote_resume_of_an_unknown_profile_is_refused_with_did_you_mean_and_creates_nothing(site):
    root, caller = site[0], site[1]
    assert remote(site, "pause", "--profile", "ops", "--reason", "x").returncode == 0
    before = sorted(p.relative_to(root) for p in root.rglob("*") if "ops" in p.parts or "opz" in p.parts)
    refused = remote(site, "resume", "--profile", "opz")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "no profile 'opz'" in refused.stderr and "did you mean 'ops'?" in refused.stderr
    assert not (root / "profiles" / "opz").exists()
    assert sorted(p.relative_to(root) for p in root.rglob("*") if "ops" in p.parts or "opz" in p.parts) == before
    assert sorted(p.name for p in caller.iterdir()) == ["ops", "watch"]
    assert remote(site, "resume", "--profile", "ops").returncode == 0


def test_a_remote_pause_without_a_scope_pauses_the_fleet_and_says_so(site):
    result = remote(site, "pause", "--reason", "no scope named")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].startswith("paused fleet (the fleet: --server has no home of its own")



# -- every command either goes to the server or is refused (issue 44 item 1) -----------------

NOT_SERVED = {
    "run --wait": ("run", "--fleet", "--ttl", "5m", "--wait", "--", "touch", "MARKER"),
    "run --drain-timeout": ("run", "--fleet", "--drain-timeout", "1m", "--", "touch", "MARKER"),
    "drain": ("drain", "--fleet", "--reason", "x"),
    "-- drain": ("--", "drain", "--fleet", "--reason", "x"),
    "windows add": ("windows", "add", "later", "--cron", "0 3 * * *", "--duration", "1h"),
    "tokens create": ("tokens", "create", "laptop", "--role", "admin"),
    "check --at": ("check", "--at", "now", "--for", "1h"),
    "cron run": ("cron", "list"),
}


@pytest.mark.parametrize("args", list(NOT_SERVED.values()), ids=list(NOT_SERVED))
def test_a_command_not_served_remotely_is_refused_with_one_line_and_acts_on_nothing(site, args):
    caller = site[1]
    marker = caller / "MARKER"
    result = remote(site, *(str(marker) if a == "MARKER" else a for a in args), via_env=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "not served over --server" in result.stderr
    assert not marker.exists()
    assert sorted(p.name for p in caller.iterdir()) == ["ops", "watch"]  # nothing written locally


@pytest.mark.parametrize("args", [("drain", "--help"), ("windows",), ("help", "run"), ("tokens", "-h")])
def test_help_is_not_refused_while_a_server_is_named(site, args):
    assert remote(site, *args, via_env=True).returncode == 0


def test_check_and_gate_over_server_read_the_served_fleet(site):
    caller = site[1]
    marker = caller / "gated"
    assert remote(site, "pause", "--reason", "served fleet held", via_env=True).returncode == 0
    checked = remote(site, "check", via_env=True)
    assert checked.returncode == 1 and "served fleet held" in checked.stdout
    gated = remote(site, "gate", "--", "touch", str(marker), via_env=True)
    assert gated.returncode == 75 and not marker.exists() and "held by" in gated.stderr
    assert remote(site, "resume", via_env=True).returncode == 0
    assert remote(site, "check", "-q", via_env=True).returncode == 0
    assert remote(site, "gate", "--", "touch", str(marker), via_env=True).returncode == 0 and marker.exists()
    marker.unlink()


def test_history_over_server_is_the_servers_trail(site):
    assert remote(site, "pause", "--reason", "on the record", via_env=True).returncode == 0
    listed = json.loads(remote(site, "history", "--json", "-n", "5", via_env=True).stdout)
    assert listed[-1]["event"] == "engage" and listed[-1]["reason"] == "on the record"
    assert listed[-1]["actor"].startswith("token:ops from ")
    text = remote(site, "history", "--limit", "5", via_env=True)
    assert text.returncode == 0 and "on the record" in text.stdout.splitlines()[-1]
