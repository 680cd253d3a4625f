"""`hermes run --server URL` (issue 44 item 1) against a real `hermes serve --http-write` over TLS:
the served fleet is held while the job runs (the job's own `hermes check` reads it over the API)
and its lease renewed, released at the end or kept for a failure; an arm the server refuses (a
viewer's token) runs nothing; a hold standing already is borrowed, as locally; an operator's
re-arm mid-job is never overwritten (412: the lease stands aside); a revoked token stops the
renewals for good (401); a server that dies mid-job leaves the job running, its exit status
kept, and the hold with its deadman. The token is never printed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_helpers import StderrLines, caller_command, hermes, make_token, self_signed, serve

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import Hold

pytestmark = pytest.mark.slow

#: the job: records `hermes check` from inside (the served fleet, through the environment it
#: was given), the generation it was given and the served hold's deadline seen at its start and
#: later (read from the server's store), waits for the file `go` when named, and exits `code`
JOB = r"""
import json, os, subprocess, sys, time
out, store, go, code = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def deadline():
    try:
        return json.load(open(os.path.join(store, "ESTOP")))["expires_at"]
    except OSError:
        return None
check = subprocess.run([sys.executable, "-m", "hermes_estop", "check"], capture_output=True, text=True)
first = deadline()
open(out + ".started", "w").close()
while go and not os.path.exists(go):
    time.sleep(0.05)
json.dump({"check": check.returncode, "check_line": check.stdout + check.stderr, "first": first,
           "later": deadline(), "generation": os.environ.get("HERMES_ESTOP_GENERATION")}, open(out, "w"))
sys.exit(code)
"""

#: seconds a condition is polled for (a loaded 2-core machine)
PATIENCE = 90.0


class Site:
    """A served fleet (`root`, its `url`) and a caller's home holding one token file per role."""

    def __init__(self, root: Path, home: Path, url: str, cert: Path, tokens: dict[str, str]) -> None:
        self.root, self.home, self.url, self.cert, self.tokens = root, home, url, cert, tokens
        (home / "job.py").write_text(JOB)

    def argv(self, *args: str, token: str = "ops", via_env: bool = False) -> tuple[dict[str, str], list[str]]:
        env, prefix = caller_command(self.home, self.url, self.cert, self.home / token, via_env=via_env)
        return env, [*prefix, *args]

    def run(self, *args: str, token: str = "ops", via_env: bool = False) -> subprocess.CompletedProcess[str]:
        env, argv = self.argv(*args, token=token, via_env=via_env)
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)

    def start(self, *args: str, token: str = "ops", via_env: bool = False) -> Running:
        env, argv = self.argv(*args, token=token, via_env=via_env)
        return Running(subprocess.Popen(argv, env=env, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE))

    def job(self, code: int = 0, *, wait_for_go: bool = False) -> list[str]:
        go = str(self.home / "go") if wait_for_go else ""
        return [sys.executable, str(self.home / "job.py"), str(self.home / "out.json"), str(self.root), go, str(code)]

    def seen(self) -> dict:
        return json.loads((self.home / "out.json").read_text())

    def started(self) -> bool:
        return (self.home / "out.json.started").exists()

    def go(self) -> None:
        (self.home / "go").write_text("")

    def hold(self) -> Hold | None:
        """The full hold standing at the served fleet's root, read from the server's store."""
        files = Fleet.of_files(self.root)
        reading = files.read((files.fleet_location,)).readings[0]
        return reading.hold if reading.active else None

    def printed_no_token(self, *outputs: str) -> bool:
        return not any(secret in text for secret in self.tokens.values() for text in outputs)


class Running:
    """A `hermes run` in the background: its stderr read as it comes (`said`), its end (`finish`)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._stderr = StderrLines(process)
        self.err = self._stderr.lines
        self.out = ""

    def said(self, text: str) -> bool:
        return text in "".join(self.err)

    def finish(self) -> tuple[int, str, str]:
        """Its exit status, stdout and whole stderr (killed if it does not end in time)."""
        try:
            assert self.process.stdout is not None
            self.out = self.process.stdout.read()
            self.process.wait(240)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(30)
        self._stderr.join(60)
        return self.process.returncode, self.out, "".join(self.err)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def _site(factory: pytest.TempPathFactory, root: Path, url: str, cert: Path, tokens: dict[str, str]) -> Site:
    home = factory.mktemp("caller")
    for name, secret in tokens.items():
        (home / name).write_text(secret + "\n")
    return Site(root, home, url.rstrip("/"), cert, tokens)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tls):
    """One server for the tests that leave it running: tokens of an operator and a viewer."""
    root = tmp_path_factory.mktemp("server")
    tokens = {name: make_token(root, name, role) for name, role in (("ops", "operator"), ("watch", "viewer"))}
    cert, key = tls
    with serve(root, "--http-write", "--tls-cert", str(cert), "--tls-key", str(key), cafile=cert) as server:
        yield root, server.url, tokens


@pytest.fixture
def site(served, tls, tmp_path_factory: pytest.TempPathFactory) -> Site:
    root, url, tokens = served
    files = Fleet.of_files(root)
    files.release_all(files.fleet_location)
    return _site(tmp_path_factory, root, url, tls[0], tokens)


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("via_env", [False, True], ids=["--server", "HERMES_ESTOP_SERVER"])
def test_the_served_fleet_is_held_while_the_job_runs_renewed_and_released_on_exit_0(site, via_env):
    with site.start("run", "--fleet", "--reason", "reindex from CI", "--ttl", "6s", "--json", "--",
                    *site.job(wait_for_go=True), via_env=via_env) as running:
        wait_until(site.started, "the job to start")
        hold = site.hold()
        assert hold is not None and hold.reason == "reindex from CI" and hold.armed_by == "token:ops"
        first = hold.expires_at
        wait_until(lambda: (h := site.hold()) is not None and h.expires_at is not None and first is not None
                   and h.expires_at > first, "a renewal to move the served deadline")
        site.go()
        code, out, err = running.finish()
    assert code == 0, err
    seen = site.seen()
    assert seen["check"] == 1 and "reindex from CI" in seen["check_line"]  # the job's own check: the served fleet
    assert seen["generation"] is not None and seen["first"] is not None
    assert site.hold() is None and hermes(site.root, "check", check=False).returncode == 0
    report = json.loads(out)
    assert report["exit"] == 0 and report["outcome"] == "released fleet" and report["scope"] == "fleet"
    assert site.printed_no_token(out, err)
    assert sorted(p.name for p in site.home.iterdir() if p.name.startswith("ESTOP")) == []  # nothing held locally


@pytest.mark.parametrize(("args", "held"), [
    ((), True),
    (("--on-failure", "release"), False),
], ids=["kept for the failure", "--on-failure release"])
def test_the_jobs_exit_status_is_run_s_and_a_failure_follows_the_failure_rule(site, args, held):
    result = site.run("run", "--fleet", "--ttl", "6s", "--on-failure-ttl", "30m", *args, "--", *site.job(3))
    assert result.returncode == 3, result.stderr
    hold = site.hold()
    if held:
        assert hold is not None and hold.reason is not None and hold.reason.startswith("maintenance failed:")
        assert hold.reason.endswith("exited 3") and hold.expires_at is not None
        assert (hold.expires_at - datetime.now(UTC)).total_seconds() > 20 * 60  # the failure's deadman, not the lease's
    else:
        assert hold is None
    assert site.printed_no_token(result.stdout, result.stderr)


@pytest.mark.parametrize(("scope", "token", "said"), [
    (("--fleet",), "watch", ["403", "has role viewer"]),
    (("--profile", "no/such"), "ops", ["no/such"]),
], ids=["a viewer's token: 403", "a bad profile name: 400"])
def test_an_arm_the_server_refuses_runs_nothing_and_is_exit_2_with_one_line(site, scope, token, said):
    result = site.run("run", *scope, "--", *site.job(), token=token)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert all(words in result.stderr for words in said), result.stderr
    assert not site.started() and site.hold() is None
    assert site.printed_no_token(result.stdout, result.stderr)


def test_a_server_that_cannot_be_reached_runs_nothing_and_is_exit_2_with_one_line(site):
    import socket

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"https://127.0.0.1:{unused.getsockname()[1]}"
    env, argv = site.argv("run", "--fleet", "--", *site.job())
    argv[argv.index(site.url)] = closed
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "cannot reach server" in result.stderr and not site.started()
    assert site.printed_no_token(result.stdout, result.stderr)


def test_a_hold_standing_already_is_borrowed_as_locally_never_renewed_nor_released(site):
    assert site.run("pause", "--fleet", "--reason", "operator's pause", "--ttl", "2h").returncode == 0
    before = site.hold()
    assert before is not None
    result = site.run("run", "--fleet", "--ttl", "6s", "--", *site.job())
    assert result.returncode == 0, result.stderr
    assert site.seen()["check"] == 1 and site.seen()["generation"] == before.generation
    assert "not armed by this job" in result.stderr and "was not this job's; left as it is" in result.stderr
    assert site.hold() == before


def test_an_operators_rearm_during_the_job_is_never_overwritten_nor_released(site):
    with site.start("run", "--fleet", "--ttl", "6s", "--", *site.job(wait_for_go=True)) as running:
        wait_until(site.started, "the job to start")
        ours = site.hold()
        assert ours is not None
        assert hermes(site.root, "pause", "--fleet", "--reason", "operator takes over", "--ttl", "2h").returncode == 0
        theirs = site.hold()
        assert theirs is not None and theirs.generation != ours.generation
        # the next renewal (every 2 s) meets the fence: 412, and the lease lets go
        wait_until(lambda: running.said("someone re-armed the hold"), "the lease to stand aside")
        site.go()
        code, _, err = running.finish()
    assert code == 0, err
    assert site.hold() == theirs  # neither overwritten by a renewal nor released at the end
    assert "left as it is" in err


def test_a_revoked_token_stops_the_renewals_for_good_and_the_job_goes_on(site, tmp_path_factory):
    secret = make_token(site.root, "ci-temp", "operator")
    (site.home / "ci-temp").write_text(secret + "\n")
    site.tokens["ci-temp"] = secret
    with site.start("run", "--fleet", "--ttl", "6s", "--", *site.job(wait_for_go=True), token="ci-temp") as running:
        wait_until(site.started, "the job to start")
        hermes(site.root, "tokens", "revoke", "ci-temp")
        wait_until(lambda: running.said("a renewal was refused"), "the refused renewal")
        site.go()
        code, out, err = running.finish()
    assert code == 0, err
    assert "401" in err and "left as it is" in err
    assert site.printed_no_token(out, err)


def test_a_server_that_dies_mid_job_leaves_the_job_its_exit_status_and_the_hold_its_deadman(tls, tmp_path_factory):
    root = tmp_path_factory.mktemp("dying-server")
    tokens = {"ops": make_token(root, "ops", "operator")}
    cert, key = tls
    with serve(root, "--http-write", "--tls-cert", str(cert), "--tls-key", str(key), cafile=cert) as server:
        site = _site(tmp_path_factory, root, server.url, cert, tokens)
        with site.start("run", "--fleet", "--ttl", "6s", "--", *site.job(4, wait_for_go=True)) as running:
            wait_until(site.started, "the job to start")
            server.process.kill()
            server.process.wait(60)
            wait_until(lambda: running.said("renewal failed"), "a renewal to fail")
            site.go()
            code, out, err = running.finish()
    assert code == 4, err  # the job's, not a crash of run's
    assert "internal error" not in err and "Traceback" not in err
    assert "could not keep fleet held for the failure" in err and "cannot reach server" in err
    hold = site.hold()
    assert hold is not None and hold.expires_at is not None  # the lease's deadman stands: the fleet wakes at it
    assert (hold.expires_at - datetime.now(UTC)).total_seconds() < 6
    assert site.printed_no_token(out, err)


def test_a_served_lease_that_lapsed_is_reported_and_never_armed_again(site, monkeypatch):
    """Over the API no cursor of the audit trail is served, so whether an operator wrote the
    scope in the gap cannot be ruled out: the lapsed lease stands aside (a local lease whose
    hold the deadman retired, with nobody else writing, arms again: tests/stores)."""
    from datetime import timedelta

    from hermes_estop.cli.api_client import Remote
    from hermes_estop.cli.served_holds import ServedHolds
    from hermes_estop.fleet.lease import Lease
    from hermes_estop.model.homes import Location

    monkeypatch.setenv("SSL_CERT_FILE", str(site.cert))
    said: list[str] = []
    lease = Lease(ServedHolds(Remote(site.url, site.tokens["ops"])), Location("fleet", Path()), timedelta(seconds=2),
                  reason="maintenance: migrate", say=said.append)
    assert not lease.arm(datetime.now(UTC)).borrowed and site.hold() is not None
    # nothing renews (a runner stopped past its lease): the server's deadman retires the hold
    wait_until(lambda: Fleet.of_files(site.root).history(5)[0][-1].event == "expire", "the server's deadman")
    later = datetime.now(UTC)
    assert not lease.renew(later)
    assert lease.state.taken_over and "no cursor of the audit trail" in lease.state.taken_over
    assert [line for line in said if "not armed again" in line]
    assert site.hold() is None
    assert "left as it is; nothing holds fleet" in lease.finish(later, 0, on_failure="hold", failure_ttl=timedelta(hours=1),
                                                                command="migrate")
