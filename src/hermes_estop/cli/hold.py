"""`hermes pause | resume | status | check | gate | history`: the hold itself."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from hermes_estop.cli.command_io import (
    EXIT_HELD,
    EXIT_OK,
    JsonOpt,
    check_components,
    current_estop,
    duration_option,
    echo_lines,
    emit_json,
    fail,
    fit_lines,
    hold_json,
    operator_time,
    reading_json,
    refuse_blank,
    retire_expired,
    terminal_width,
    warn_if_policy_unread,
)
from hermes_estop.cli.exits import GATE_HELD_EXIT
from hermes_estop.cli.interrupt_note import say_on_interrupt
from hermes_estop.cli.served import remote_if_named
from hermes_estop.cli.write_outcome import Resumed, ack_echo, ack_exit, ack_json, finish_resume, refused_resume
from hermes_estop.model.errors import HoldConflict, InvalidArgument, StoreError, StoreUnavailable
from hermes_estop.model.hold import Allow, Hold, HoldState, Reading
from hermes_estop.model.homes import Location
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant, schedulable, utc_now
from hermes_estop.process.describe import paused_lines
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import check_profile

__all__ = ["GATE_HELD_EXIT", "register", "run_check_at"]

if TYPE_CHECKING:
    from hermes_estop.cli.api_client import Remote
    from hermes_estop.fleet.registry.acks import AckSurvey
    from hermes_estop.fleet.registry.entries import Ack

UserOpt = Annotated[str | None, typer.Option("--user", help="The authenticated principal asking to work.")]
ProfileOpt = Annotated[str | None, typer.Option("--profile", help="The profile the work is for.")]
FleetOpt = Annotated[bool, typer.Option("--fleet", help="The fleet root's hold instead of this home's.")]
ScopeProfileOpt = Annotated[str | None, typer.Option("--profile", metavar="NAME", help="That profile's hold instead of this home's.")]
OnlyOpt = Annotated[list[str] | None, typer.Option("--only", metavar="COMPONENT", help="A scoped hold: only this consumer component (cron, kanban, gateway, or a name your consumer gives itself; repeatable).")]
JobOpt = Annotated[list[str] | None, typer.Option("--job", metavar="GLOB", help="A scoped hold: only the units of work whose name matches (cron job names, APScheduler job ids, kanban assignee or title; repeatable).")]
ComponentOpt = Annotated[str | None, typer.Option("--component", metavar="NAME", help="The consumer component the work is for (scoped holds).")]
WorkJobOpt = Annotated[str | None, typer.Option("--job", metavar="NAME", help="The unit of work's name (scoped holds).")]
WaitOpt = Annotated[bool, typer.Option("--wait", help="Then wait until every registered consumer the hold covers acknowledged it (or is lost); exit 75 at --wait-timeout.")]
WaitTimeoutOpt = Annotated[str | None, typer.Option("--wait-timeout", metavar="DUR", help="With --wait: give up after this long (default 60s).")]


def _remote() -> Remote | None:
    """The server `--server` / $HERMES_ESTOP_SERVER names (None: this host's store; the remote
    client is not imported then)."""
    return remote_if_named()


#: break glass (issue 37): a write the fleet's policy refuses goes ahead, audited as an override
OverrideOpt = Annotated[str | None, typer.Option(
    "--override", metavar="REASON",
    help="Break glass: write although the fleet's policy refuses it (an admin, or a local operator who can write "
         "the fleet root); audited, notified and shown on the status page.")]


def _target(estop: Estop, fleet: bool, profile: str | None) -> Location:
    """The location a pause or resume addresses: this home's, the fleet root's (`--fleet`) or a
    profile's (`--profile NAME`, a scope of the fleet)."""
    if fleet and profile is not None:
        raise InvalidArgument("give --fleet or --profile, not both")
    if profile is not None:
        return estop.fleet.location(profile)
    return estop.location(fleet=fleet)


def pause(
    reason: Annotated[str | None, typer.Option("--reason", help="Why; shown to refused users.")] = None,
    allow_user: Annotated[list[str] | None, typer.Option("--allow-user", help="A user id that keeps working (repeatable).")] = None,
    allow_profile: Annotated[list[str] | None, typer.Option("--allow-profile", help="Narrow the allowed users to these profiles (repeatable).")] = None,
    ttl: Annotated[str | None, typer.Option("--ttl", help="Deadman: lift after this long (45m, 1h30m, 90s, 1d, PT45M).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Deadman: lift at this time: 15:00, tomorrow 03:00 (local time unless a zone follows: 15:00 Europe/Berlin), or ISO-8601.")] = None,
    fleet: FleetOpt = False,
    profile: ScopeProfileOpt = None,
    replace: Annotated[bool, typer.Option("--replace", help="Start from nothing instead of keeping the standing allowlist, deadline and reason.")] = False,
    only: OnlyOpt = None,
    job: JobOpt = None,
    wait: WaitOpt = False,
    wait_timeout: WaitTimeoutOpt = None,
    as_json: JsonOpt = False,
    override: OverrideOpt = None,
) -> None:
    """Arm (or re-arm) the hold: stop all NEW work. Flags not given keep the standing values.
    --only/--job arm a scoped hold beside the others (the same selector again re-arms it).
    With --wait, return once every consumer it covers has seen it."""
    if ttl is not None and until is not None:
        raise InvalidArgument("give --ttl or --until, not both")
    refuse_blank("--ttl", ttl)
    refuse_blank("--until", until)
    remote = _remote()
    if remote is not None:
        _refuse_wait_over(wait, wait_timeout)
        if ttl is not None:
            duration_option("--ttl", ttl)  # refused in the local words before the server is asked
        deadline_text = operator_time("--until", until, utc_now()).isoformat() if until is not None else None
        from hermes_estop.cli.api_client import remote_pause  # only with a server named (not for a local pause)

        remote_pause(remote, reason=reason, allow_user=allow_user, allow_profile=allow_profile, ttl=ttl,
                     until=deadline_text, fleet=fleet, profile=profile, replace=replace, only=only, job=job,
                     as_json=as_json, override=override)
    allow = _allowlist(reason, allow_user, allow_profile)
    span = duration_option("--ttl", ttl) if ttl is not None else None
    limit = _wait_limit(wait, wait_timeout)
    estop = current_estop()
    deadline = operator_time("--until", until, estop.clock()) if until is not None else None
    location = _target(estop, fleet, profile)
    check_components(estop, only)
    retire_expired(estop)  # what lapsed goes first, with the store's trusted clock (docs/design.md §5)
    before = _generation_at(estop, location)
    # an interrupt at any point after the read above, in this command or in the framework after
    # it, says what is on disk now (`hermes_estop.cli.main` says it)
    say_on_interrupt(lambda: _on_disk(estop, location, before))
    _pause(estop, location, reason, allow, span, deadline, replace, fleet, profile, limit, as_json, only, job, override)


def _refuse_wait_over(wait: bool, wait_timeout: str | None) -> None:
    if wait or wait_timeout is not None:
        raise InvalidArgument("--wait is not served over --server (the consumers report to the server's store)")


def _allowlist(reason: str | None, allow_user: list[str] | None, allow_profile: list[str] | None) -> Allow | None:
    """The allowlist `--allow-user`/`--allow-profile` give (None: keep the standing one), after
    refusing what a local pause refuses before anything is read: a blank reason, a profile alone."""
    if reason is not None and reason and not reason.strip():
        # refused rather than guessed: a blank reason is neither "keep" nor a reason to show
        raise InvalidArgument(f"invalid --reason {reason!r}: blank; give text, or --reason '' to clear the standing reason")
    if allow_profile and not allow_user:
        raise InvalidArgument(
            f"--allow-profile {' '.join(allow_profile)} without --allow-user: a profile never grants on its own"
        )
    return Allow.of(allow_user, allow_profile or ()) if allow_user else None


def _pause(estop: Estop, location: Location, reason: str | None, allow: Allow | None, ttl: timedelta | None,
           until: datetime | None, replace: bool, fleet: bool, profile: str | None, limit: float | None,
           as_json: bool, only: list[str] | None = None, jobs: list[str] | None = None,
           override: str | None = None) -> None:
    failures = estop.fleet.audit_failures
    # the store's warning would reach stderr raw through logging's last resort: pause says it itself
    quiet = logging.NullHandler()
    logging.getLogger("hermes_estop").addHandler(quiet)
    try:
        if profile is None:
            hold = estop.engage(reason=reason, allow=allow, ttl=ttl, expires_at=until, replace=replace, fleet=fleet,
                                only=only, jobs=jobs, override=override)
        else:
            hold = estop.fleet.engage(location, *estop.engage_request(reason, allow, ttl, until, replace,
                                                                      only=only, jobs=jobs), override=override)
    finally:
        logging.getLogger("hermes_estop").removeHandler(quiet)
    warn_if_policy_unread(estop)
    if estop.fleet.audit_failures != failures:
        typer.echo(f"hermes: warning: the hold stands, but its audit line was not written: "
                   f"{one_line(estop.fleet.last_audit_failure or 'unknown')}", err=True)
    snapshot = estop.snapshot()
    where = estop.fleet.where(location)
    ack = _engaged(location, hold) if limit is not None else None
    if as_json:
        found = _wait(estop, ack, limit, show=False)
        emit_json({"scope": location.scope, "path": where, **hold_json(hold, snapshot.now),
                   "engaged": snapshot.engaged, **ack_json(found)})
        raise typer.Exit(ack_exit(found))
    others = [r for r in snapshot.active if r.location != location]
    echo_lines(paused_lines(location, hold, where, _not_the_fleet(location, fleet, profile), snapshot.now, others))
    found = _wait(estop, ack, limit, show=True)
    raise typer.Exit(ack_echo(found, "stopped"))


def _not_the_fleet(location: Location, fleet: bool, profile: str | None) -> str:
    """A plain `hermes pause` from a profile home pauses that profile alone: said, so an
    operator who meant the fleet is not misled (issue 38)."""
    if fleet or profile is not None or location.is_fleet or location.scope.startswith("home:"):
        return ""
    return " (not the fleet: --fleet for every profile)"


def _wait_limit(wait: bool, wait_timeout: str | None) -> float | None:
    """Seconds `--wait` waits at most, None without `--wait` (checked before anything is written)."""
    if not wait:
        if wait_timeout is not None:
            raise InvalidArgument("--wait-timeout needs --wait")
        return None
    from hermes_estop.cli.wait import parse_wait_timeout  # only --wait waits: not for every pause (issue 45)

    return parse_wait_timeout(wait_timeout)


def _engaged(location: Location, hold: Hold) -> Ack:
    from hermes_estop.fleet.registry.acks import ack_for_hold  # only --wait waits: not for every pause (issue 45)

    return ack_for_hold(location.scope, hold)


def _wait(estop: Estop, ack: Ack | None, limit: float | None, *, show: bool) -> AckSurvey | None:
    if limit is None or ack is None:
        return None
    from hermes_estop.cli.wait import wait_with_progress  # only --wait waits: not for every pause (issue 45)

    return wait_with_progress(estop.fleet, ack, limit, show=show)


def resume(
    generation: Annotated[str | None, typer.Option("--generation", help="Release only this generation.")] = None,
    hold: Annotated[str | None, typer.Option("--hold", metavar="ID", help="Release only this scoped hold (its id from `hermes status`).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Release every hold at the scope: the full hold and every scoped hold.")] = False,
    fleet: FleetOpt = False,
    profile: ScopeProfileOpt = None,
    wait: WaitOpt = False,
    wait_timeout: WaitTimeoutOpt = None,
    as_json: JsonOpt = False,
    override: OverrideOpt = None,
) -> None:
    """Release the hold of this home (`--fleet`: the fleet root; `--profile NAME`: that profile's).
    A plain resume lifts the full hold and says which scoped holds still stand (exit 1 when only
    scoped holds stood); `--hold ID` lifts one scoped hold, `--all` every hold at the scope.
    In-flight work was never stopped. With --wait, return once every consumer it covered has
    seen it gone."""
    if sum((hold is not None, generation is not None, all_)) > 1:
        raise InvalidArgument("give one of --generation, --hold or --all")
    remote = _remote()
    if remote is not None:
        _refuse_wait_over(wait, wait_timeout)
        from hermes_estop.cli.api_client import remote_resume  # only with a server named

        remote_resume(remote, generation=generation, hold=hold, all_=all_, fleet=fleet, profile=profile, as_json=as_json,
                      override=override)
    limit = _wait_limit(wait, wait_timeout)
    estop = current_estop()
    location = _target(estop, fleet, profile)
    if profile is not None:
        check_profile(estop, profile)
    ack = _release_ack(estop, location, generation, hold) if limit is not None else None
    try:
        removed = estop.fleet.resume(location, generation=generation, hold=hold, every=all_, override=override)
    except HoldConflict as exc:
        refused_resume(location.scope, exc, as_json=as_json)
    except StoreError as exc:
        fail(f"{exc}; {_resume_advice(location, exc)}")
    retire_expired(estop)  # after the operator's own lift, which says what it removed as it always did
    lifted = ack if removed else None
    finish_resume(_resumed(estop, location, removed), as_json=as_json,
                  wait=lambda show: _wait(estop, lifted, limit, show=show))


def _resumed(estop: Estop, location: Location, removed: Sequence[Reading]) -> Resumed:
    """What a local resume lifted at `location`, and what stands after it, read from the store."""
    from hermes_estop.observe.status import lift_command  # the status stack: not for `hermes pause` (issue 45)

    snapshot = estop.snapshot()
    where = estop.fleet.where
    (addressed,) = estop.fleet.read((location,)).readings
    holds: list[dict[str, object]] = [
        reading_json(r, snapshot.now, where(r.location)) | {"lift": lift_command(r.location, estop.layout)}
        for r in snapshot.every_active]
    return Resumed(location, where(location), removed, addressed, snapshot, holds,
                   lambda at: lift_command(at, estop.layout))


def _release_ack(estop: Estop, location: Location, generation: str | None, hold: str | None) -> Ack | None:
    """What `--wait` waits for: every consumer the lifted hold covered seeing it gone (None: no hold to lift)."""
    lifted = _standing(estop, location, hold) if generation is None else None
    standing = generation if generation is not None else lifted.generation if lifted is not None else None
    selector = lifted.selector if lifted is not None else None
    from hermes_estop.fleet.registry.acks import ack_for_release  # only --wait waits (issue 45)

    return ack_for_release(estop.fleet, location.scope, standing, selector) if standing is not None else None


def _generation_at(estop: Estop, location: Location, hold_id: str | None = None) -> str | None:
    """The generation of the full hold at `location` (with `hold_id`: of that scoped hold)."""
    standing = _standing(estop, location, hold_id)
    return standing.generation if standing is not None else None


def _standing(estop: Estop, location: Location, hold_id: str | None = None) -> Hold | None:
    """The full hold at `location` (with `hold_id`: that scoped hold), None where none stands."""
    (reading,) = estop.fleet.read((location,)).readings
    if hold_id is not None:
        return next((s.hold for s in reading.scoped if s.hold is not None and s.hold.hold_id == hold_id), None)
    return reading.hold if reading.present else None


def _on_disk(estop: Estop, location: Location, before: str | None) -> str:
    """What an interrupted pause left, read back from the store: the interrupt may land after
    the hold was renamed in, so "interrupted" alone would be a lie half the time."""
    (reading,) = estop.fleet.read((location,)).readings
    where = printable(location.describe())
    if reading.state is HoldState.ABSENT:
        return f"no hold stands at {where}"
    generation = reading.hold.generation if reading.hold is not None else None
    if generation is not None and generation != before:
        return f"{where} IS HELD: generation {printable(generation)} was written (see `hermes status`)"
    return f"{where} is {reading.state.value} as before this command; nothing was written (see `hermes status`)"


def _resume_advice(location: Location, exc: StoreError) -> str:
    """What will actually lift a hold `hermes resume` could not remove (issue 15: an error
    that says what to do, not just what failed)."""
    if isinstance(exc, StoreUnavailable):
        return "the store must answer for a resume: see `hermes store status`, and retry when it is back"
    sentinel = location.sentinel
    try:
        mode = os.lstat(sentinel).st_mode
    except OSError:
        return f"check the permissions of {printable(sentinel.parent)}, then retry"
    if not stat.S_ISREG(mode):
        return f"{printable(sentinel)} is not a hold file `hermes resume` may remove: remove it by hand"
    return f"check the permissions of {printable(sentinel.parent)}, or remove {printable(sentinel)} by hand"


def status(as_json: JsonOpt = False) -> None:
    """Show what holds this process (scope, reason, generation, deadline, allowlist), then every
    other scope of the fleet that holds, each with the command that lifts it from here."""
    from hermes_estop.observe.status import fleet_status  # the status stack: not for `hermes pause` (issue 45)

    remote = _remote()
    if remote is not None:
        from hermes_estop.cli.api_client import remote_status  # only with a server named

        remote_status(remote, as_json=as_json)
    document = fleet_status(current_estop(), as_json=as_json)
    if as_json:
        emit_json(document.to_json())
        return
    echo_lines(fit_lines(document.lines(), terminal_width()))


def check(user: UserOpt = None, profile: ProfileOpt = None, component: ComponentOpt = None, job: WorkJobOpt = None,
          quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing; the exit code says it.")] = False,
          at: Annotated[str | None, typer.Option("--at", help="Ask about this instant (15:00, tomorrow 03:00, a zone after it, ISO-8601, `now` or `now+DUR`, with --for): the holds standing now (with their deadmen) and every window occurrence covering it.")] = None,
          for_: Annotated[str | None, typer.Option("--for", help="With --at: held at any instant of [TIME, TIME+DUR)? (30m, 2h, PT45M).")] = None,
          impact: Annotated[bool, typer.Option("--impact", help="With --at and --for: what a pause over [TIME, TIME+DUR) would hold back (cron runs, ready cards, gateway turns, acknowledgements owed).")] = False,
          as_json: JsonOpt = False) -> None:
    """Exit 0 when work may proceed, 1 when held; with --at [--for], whether it would be (forecast)."""
    if impact and at is None:
        raise InvalidArgument("--impact needs --at TIME --for DUR: it previews a pause over that interval")
    if at is None and for_ is None:  # over --server too (run_check asks the server)
        from hermes_estop.cli.fast_path import run_check  # the check path's own: not for `hermes pause` (issue 45)

        raise typer.Exit(run_check(user, profile, quiet=quiet, as_json=as_json, component=component, job=job))
    if _remote() is not None:
        raise InvalidArgument("check --at/--for is not served over --server (the forecast needs the fleet's windows): "
                              "run it on a host of the fleet")
    raise typer.Exit(run_check_at(user, profile, at, for_, quiet=quiet, as_json=as_json, component=component, job=job,
                                  impact=impact))


#: at most this many deciding holds are listed per held interval in the text output (--json: all)
_LISTED_HOLDS = 10


def run_check_at(user: str | None, profile: str | None, at: str | None, for_: str | None, *,
                 quiet: bool = False, as_json: bool = False, component: str | None = None,
                 job: str | None = None, impact: bool = False) -> int:
    """`hermes check --at TIME [--for DUR]`: exit 1 when (user, profile) would be held at TIME, or
    at any instant of [TIME, TIME+DUR), else 0; prints which holds and window occurrences decide,
    with their times (`Estop.forecast`). Bad input raises `EstopError` naming the value (exit 2)."""
    if at is None:
        raise InvalidArgument("--for needs --at TIME: the forecast starts at that instant")
    estop = current_estop()
    now = estop.clock()
    start = schedulable(_at(at, now), what="--at time")
    span = duration_option("--for", for_) if for_ is not None else None
    if impact:  # the preview reads the consumers' tables: not for `hermes pause` (issue 45)
        from hermes_estop.cli.check_impact import run_check_impact

        return run_check_impact(start, span, user, profile, component=component, job=job, as_json=as_json)
    if user is not None:
        Allow.of([user])  # the id rules a write applies (one line naming a bad id)
    forecast = estop.forecast(start, start + span if span is not None else start, user, profile,
                              component=component, job=job)
    if as_json:
        emit_json({"proceed": not forecast.held, **forecast.to_json()})
    elif not quiet:
        when = f"at any instant of [{display_instant(start)}, {display_instant(forecast.end)})" if span is not None \
            else f"at {display_instant(start)}"
        if not forecast.held:
            typer.echo(f"proceed: not held {when}")
        else:
            typer.echo(f"held {when}" + (f": {len(forecast.intervals)} held interval(s)" if span is not None else ", by:"))
            for interval in forecast.intervals:
                if span is not None:
                    typer.echo(f"  held from {display_instant(interval.start)} until {display_instant(interval.end)}, by:")
                for hold in interval.holds[:_LISTED_HOLDS]:
                    typer.echo(f"    {printable(hold.describe())}")
                if len(interval.holds) > _LISTED_HOLDS:
                    typer.echo(f"    ... and {len(interval.holds) - _LISTED_HOLDS} more (--json lists them all)")
        for note in forecast.notes:
            typer.echo(f"note: {printable(note)}")
    return EXIT_HELD if forecast.held else EXIT_OK


def _at(value: str, now: datetime) -> datetime:
    """`--at`: `now`, `now+DUR` (`now+1d`, `now+90m`), or a time (`operator_time`)."""
    text = value.strip().lower()
    if text == "now":
        return now
    if text.startswith("now+"):
        return now + duration_option("--at now+", text[4:])
    return operator_time("--at", value, now)


def gate(
    command: Annotated[list[str] | None, typer.Argument(help="The command to run when not held (after --).")] = None,
    user: UserOpt = None,
    profile: ProfileOpt = None,
    held_exit: Annotated[int, typer.Option("--held-exit", help="Exit code when held.")] = GATE_HELD_EXIT,
    component: ComponentOpt = None,
    job: WorkJobOpt = None,
) -> None:
    """Run CMD only when work may proceed: `hermes gate -- CMD ARGS...` (crontab, systemd timers).

    When held it runs nothing, prints one line saying what holds, and exits 75 (`--held-exit`)."""
    from hermes_estop.cli.fast_path import run_gate  # the check path's own: not for `hermes pause` (issue 45)

    raise typer.Exit(run_gate(command or [], user, profile, held_exit, component, job))


def history(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Newest N events.")] = 50,
    since: Annotated[str | None, typer.Option("--since", help="Only events at or after this ISO-8601 time, or this long ago (2h, 1d).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The audit trail: every engage, re-arm, release, retire, expiry lift and skipped window
    (a lease's consecutive renewals on one line; --json lists every event)."""
    from hermes_estop.cli.fast_path import HISTORY_MAX  # the check path's own: not for `hermes pause` (issue 45)
    from hermes_estop.cli.history import run_history  # the history command's own: not for `hermes pause` (issue 45)

    if limit > HISTORY_MAX:
        raise InvalidArgument(f"invalid --limit {limit}: expected 1 to {HISTORY_MAX}")
    raise typer.Exit(run_history(limit, since, as_json))


def register(app: typer.Typer, only: str | None = None) -> None:
    """The hold commands on `app` (`only`: that one alone)."""
    for command in (pause, resume, status, check, gate, history):
        if only is None or command.__name__ == only:
            settings = {"allow_interspersed_args": False} if command is gate else None
            app.command(context_settings=settings)(command)
