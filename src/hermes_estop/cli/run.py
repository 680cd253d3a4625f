"""`hermes run -- CMD...`: a maintenance job held by a lease that lives exactly as long as the job.

Arms a hold whose deadman is a short lease (`--ttl`, default 5m), renewed every ttl/3 while CMD
runs (fenced on the generation it wrote: never over an operator's re-arm), optionally waits for
the work in flight to finish (`--drain-timeout`), runs CMD in its own process group with the
hold's generation in `HERMES_ESTOP_GENERATION`, and at the end releases the hold on exit 0 or,
on failure, keeps it with the reason "maintenance failed: CMD exited N" and a fixed deadman
(`--on-failure-ttl`, default 1h), or releases it (`--on-failure release`). The exit status is
CMD's, also when the final release fails (the last line then says what stands, until when).
SIGINT/SIGTERM are passed to CMD's process group; the hold follows the failure rule. The job
never runs without its hold: what CMD left running in its group is stopped at its end (named),
and if `hermes run` itself dies, CMD's process group is killed (`processes.Job`) and the hold
lifts at the lease's end. The renewer is stopped and joined before the hold's final write.

With `--server` (or $HERMES_ESTOP_SERVER) the hold is the served fleet's, kept over its write API
(`cli.served_holds`): the same lease, each write one fenced request the server judges; CMD gets
the server and the token file in its environment, so a `hermes check` inside it reads the
served fleet. `--wait` and `--drain-timeout` read this host's registry: refused over --server.
"""

from __future__ import annotations

import shlex
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hermes_estop.cli.command_io import (
    current_estop,
    duration_option,
    emit_json,
    refuse_blank,
    retire_expired,
    warn_if_policy_unread,
)
from hermes_estop.cli.served import remote_if_named, served_environment
from hermes_estop.cli.served_holds import ServedHolds
from hermes_estop.cli.wait import ack_lines, parse_wait_timeout, wait_with_progress
from hermes_estop.consumers.drainer import wait_until_quiet
from hermes_estop.fleet.fleet import Fleet
from hermes_estop.fleet.lease import Lease, LeaseHolds, Renewer
from hermes_estop.fleet.registry.entries import Ack
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.hold import Allow
from hermes_estop.model.homes import Location
from hermes_estop.model.text import printable
from hermes_estop.model.timeutil import utc_now
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import child_environment
from hermes_estop.system.processes import Job

if TYPE_CHECKING:  # the remote client is imported only when a server is named
    from hermes_estop.cli.api_client import Remote

__all__ = ["register"]

GENERATION_ENV = "HERMES_ESTOP_GENERATION"
#: exit status when the job did not run because the fleet did not drain in time
EXIT_NOT_RUN = 75
EXIT_NOT_FOUND = 127
#: seconds what CMD left running in its process group gets between SIGTERM and SIGKILL
LEFTOVER_GRACE = 5.0


def _say(message: str) -> None:
    typer.echo(f"hermes run: {printable(message)}", err=True)


def _exit_status(returncode: int) -> int:
    """CMD's exit status as a shell reports it (128 + N for a death by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def run(
    command: Annotated[list[str] | None, typer.Argument(help="The maintenance job (after --).")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why; shown to refused users (default: maintenance: CMD).")] = None,
    ttl: Annotated[str, typer.Option("--ttl", metavar="DUR", help="The lease: the hold lifts this long after the last renewal (renewed every ttl/3).")] = "5m",
    fleet: Annotated[bool, typer.Option("--fleet", help="Hold the whole fleet (the fleet root).")] = False,
    profile: Annotated[str | None, typer.Option("--profile", metavar="NAME", help="Hold that profile instead of this home.")] = None,
    allow_user: Annotated[list[str] | None, typer.Option("--allow-user", metavar="ID", help="A user id admitted through the hold while the job runs (repeatable).")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Before CMD, wait until every registered consumer the hold covers acknowledged it (or is lost); exit 75 without running CMD at --wait-timeout.")] = False,
    wait_timeout: Annotated[str | None, typer.Option("--wait-timeout", metavar="DUR", help="With --wait: give up after this long (default 60s).")] = None,
    drain_timeout: Annotated[str | None, typer.Option("--drain-timeout", metavar="DUR", help="Before CMD, wait this long at most for the work in flight to finish (exit 75 without running CMD if it does not).")] = None,
    terminate_after: Annotated[str | None, typer.Option("--terminate-after", metavar="DUR", help="With --drain-timeout: SIGTERM (then SIGKILL) what still runs after this long.")] = None,
    on_failure: Annotated[str, typer.Option("--on-failure", metavar="hold|release", help="When CMD fails: keep holding (default) or release.")] = "hold",
    on_failure_ttl: Annotated[str, typer.Option("--on-failure-ttl", metavar="DUR", help="The fixed deadman of the hold kept after a failure.")] = "1h",
    as_json: Annotated[bool, typer.Option("--json", help="Print what happened as JSON on stdout at the end.")] = False,
) -> None:
    """Run a maintenance job under a hold that lives exactly as long as the job (a renewed lease)."""
    argv = list(command or [])
    durations = _validated(argv, on_failure, fleet, profile, wait, wait_timeout, {
        "--ttl": ttl, "--on-failure-ttl": on_failure_ttl, "--drain-timeout": drain_timeout,
        "--terminate-after": terminate_after})
    wait_limit = parse_wait_timeout(wait_timeout) if wait else None
    allow = Allow.of(allow_user) if allow_user else None
    remote = remote_if_named()
    side = _local(fleet, profile) if remote is None else _served(remote, fleet, profile, wait, drain_timeout)
    location = side.location
    shown = shlex.join(argv)
    lease = Lease(side.holds, location, durations["--ttl"], reason=reason if reason is not None else f"maintenance: {shown}",
                  allow=allow, armed_by=side.armed_by, say=_say)
    state = lease.arm(side.clock())
    side.warn()
    if state.borrowed:
        _say(f"a hold not armed by this job stands at {location.describe()} (generation {state.generation}): "
             "the job runs under it; it is neither renewed nor released by this job")
    else:
        _say(f"held {location.describe()}{side.served_by} (generation {state.generation}), lease {ttl} renewed every "
             f"{lease.renew_every.total_seconds():g}s{side.note}")
    renewer = Renewer(lease, side.clock)
    code: int
    try:
        estop = side.estop
        if estop is not None and ((wait_limit is not None and not _acknowledged(lease, estop.fleet, location, wait_limit))
                                  or (drain_timeout is not None and not _drained(estop, location, durations, fleet, profile))):
            code = EXIT_NOT_RUN
            renewer.stop()
            outcome = lease.finish(side.clock(), 0, on_failure="release", failure_ttl=durations["--on-failure-ttl"],
                                   command=shown)
            _say(f"the job did not run; {outcome}")
        else:
            code = _run_command(argv, lease, side, shown)
            renewer.stop()
            outcome = lease.finish(side.clock(), code, on_failure=on_failure,
                                   failure_ttl=durations["--on-failure-ttl"], command=shown)
            _say(f"{shown} exited {code}; {outcome}")
    finally:
        renewer.stop()
    if as_json:
        emit_json({"scope": location.scope, "command": argv, "exit": code, "outcome": outcome,
                   "generation": lease.state.generation, "taken_over": lease.state.taken_over,
                   "borrowed": lease.state.borrowed})
    raise typer.Exit(code)


@dataclass(frozen=True)
class _Side:
    """Where the job's hold is kept: this host's fleet (`estop`), or a server's over its write
    API (`estop` None: nothing of this host's home is read or written)."""

    holds: Fleet | LeaseHolds
    location: Location
    clock: Callable[[], datetime]
    armed_by: str | None
    estop: Estop | None
    #: what the job's environment adds to this process's (the store, or the server, it reads)
    env: dict[str, str]
    #: says what the arm left to say: the fleet's policy could not be read (armed under none)
    warn: Callable[[], None]
    #: said after the scope on the "held" line (the server that keeps it), and at its end
    served_by: str = ""
    note: str = ""


def _local(fleet: bool, profile: str | None) -> _Side:
    estop = current_estop()
    location = estop.fleet.location(profile) if profile is not None else estop.location(fleet=fleet)
    retire_expired(estop)  # what lapsed goes first, with the store's trusted clock (docs/design.md §5)
    return _Side(estop.fleet, location, estop.fleet.clock, f"run:{estop.actor}", estop, child_environment(),
                 lambda: warn_if_policy_unread(estop))


def _served(remote: Remote, fleet: bool, profile: str | None, wait: bool, drain_timeout: str | None) -> _Side:
    """The hold kept by the server `--server` names (the fleet unless `--profile`: the remote CLI
    has no home of its own); `--wait` and `--drain-timeout` watch this host's registry and work
    in flight, not the server's: refused with one line."""
    for flag, given in (("--wait", wait), ("--drain-timeout", drain_timeout is not None)):
        if given:
            raise InvalidArgument(f"hermes run {flag} is not served over --server ({remote.url}): the server's "
                                  "consumers and their work are not read over its API; run it on a host of the fleet, "
                                  f"or drop {flag}")
    scope = profile if profile is not None else "fleet"
    note = "; the fleet: --server has no home of its own (--profile NAME for one profile)" \
        if not fleet and profile is None else ""
    holds = ServedHolds(remote)

    def warn() -> None:
        if holds.warning:
            _say(f"warning: {holds.warning}")

    return _Side(holds, Location(scope, Path()), utc_now, None, None, {**child_environment(), **served_environment()},
                 warn, f" on {remote.url}", note)


def _validated(argv: list[str], on_failure: str, fleet: bool, profile: str | None, wait: bool, wait_timeout: str | None,
               given: dict[str, str | None]) -> dict[str, timedelta]:
    """The duration flags given, parsed; `InvalidArgument` for a combination `hermes run` refuses."""
    if not argv:
        raise InvalidArgument("no command given: use hermes run [OPTIONS] -- CMD [ARGS...]")
    if on_failure not in ("hold", "release"):
        raise InvalidArgument(f"invalid --on-failure {on_failure!r}: expected hold or release")
    if fleet and profile is not None:
        raise InvalidArgument("give --fleet or --profile, not both")
    durations = {}
    for flag, value in given.items():
        if value is None:
            continue
        refuse_blank(flag, value)
        durations[flag] = duration_option(flag, value)
    if given["--terminate-after"] is not None and given["--drain-timeout"] is None:
        raise InvalidArgument("--terminate-after needs --drain-timeout")
    if wait_timeout is not None and not wait:
        raise InvalidArgument("--wait-timeout needs --wait")
    return durations


def _acknowledged(lease: Lease, fleet: Fleet, location: Location, limit: float) -> bool:
    """Wait until every registered consumer the hold covers saw it (any generation the lease
    wrote: renewals go on meanwhile) or is lost; the report on stderr either way."""
    ack = Ack(location.scope, lease.state.generation or "?", engaged=True, also=lease.generations)
    found = wait_with_progress(fleet, ack, limit, show=True)
    out, err = ack_lines(found, verb="stopped")
    for line in out + err:
        typer.echo(line, err=True)
    return found.done


def _drained(estop: Estop, location: Location, durations: dict[str, Any], fleet: bool, profile: str | None) -> bool:
    view = estop.for_profile(profile) if profile is not None else estop
    limit = durations["--drain-timeout"].total_seconds()
    kill_at = durations["--terminate-after"].total_seconds() if "--terminate-after" in durations else None
    result = wait_until_quiet(view, fleet=fleet, timeout=limit, terminate_after=kill_at)
    if result.last.quiet:
        _say(f"drained {location.describe()} in {result.waited:.1f}s")
        return True
    running = "; ".join(item.describe(result.now) for item in result.last.items) or "unknown"
    _say(f"still in flight after {durations['--drain-timeout']}: {running}")
    return False


def _run_command(argv: list[str], lease: Lease, side: _Side, shown: str) -> int:
    """CMD in its own process group with the hold's generation in its environment, never
    outliving `hermes run` (`processes.Job`); SIGINT and SIGTERM to `hermes run` are passed to
    that group; what CMD left running there is stopped when it ends, with a line naming it.
    Returns CMD's exit status."""
    env = dict(side.env)
    if lease.state.generation is not None:
        env[GENERATION_ENV] = lease.state.generation
    _record(side, "task-start", lease, f"hermes run: {shown}")
    try:
        job = Job(argv, env)
    except OSError as exc:
        _say(f"cannot start {shown}: {exc.strerror or exc}")
        _record(side, "task-end", lease, f"hermes run: {shown} could not start ({exc.strerror or exc})")
        return EXIT_NOT_FOUND
    if job.guard is None:
        _say(f"warning: no guard process for {shown}: if hermes run dies, only CMD itself is stopped, not what it started")

    def forward(signum: int, _frame: Any) -> None:
        job.signal(signal.Signals(signum))

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        job.wait()
        returncode, left = job.finish(LEFTOVER_GRACE)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if left:
        named = ", ".join(f"pid {pid} ({command})" for pid, command in left)
        _say(f"stopped what {shown} left running in its process group: {named}")
    code = _exit_status(returncode)
    _record(side, "task-end", lease, f"hermes run: {shown} exited {code}")
    sys.stdout.flush()
    return code


def _record(side: _Side, event: str, lease: Lease, detail: str) -> None:
    """The job's start or end in this fleet's audit trail; a trail that cannot be written is
    said, never a reason to stop the job or to leave the hold. Over `--server` the API takes no
    such line: the server's trail has the lease's arm, renewals and release, by the token."""
    if side.estop is None:
        return
    try:
        side.estop.fleet.record(event, side.location, generation=lease.state.generation, detail=detail)
    except (EstopError, OSError) as exc:
        _say(f"warning: cannot record {event} in the audit trail ({exc})")


def register(app: typer.Typer) -> None:
    """Add `hermes run` to `app`."""
    app.command("run", context_settings={"allow_interspersed_args": False})(run)
