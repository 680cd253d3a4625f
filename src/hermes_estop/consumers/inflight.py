"""The work in flight on the locations a hold covers, as another process sees it (issue 11):
what `hermes drain` waits for and `hermes status` counts.

Each consumer records its in-flight work where it already claims it: a cron job's claim in its
home's table (the ticking process's pid, the worker's process group, the start), a kanban card's
`running` row (the worker's pid, the start), a gateway's turns in `gateway/turns-<pid>.json`. A
record whose pid is no longer alive is not in flight: a crashed worker's claim never keeps a
drain waiting. A worker's record also keeps its start time (`processes.start_time`, read at
spawn): a pid now running something that started at another time is a stranger that reused the
pid, so the work is gone, and a stranger is never signalled (nor is a worker whose record has no
start time: it cannot be told from one).


A hold at the fleet root covers the root and every profile home, and every kanban card; a hold
in a profile home covers that home, and the cards assigned to that profile.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hermes_estop.consumers.board import READ_WAIT, Board
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.consumers.turns import pid_alive, read_turns
from hermes_estop.consumers.worker import KILL_GRACE, WorkResult
from hermes_estop.model.errors import InvalidArgument, StoreError
from hermes_estop.model.homes import PROFILES_DIR, validate_profile_name
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
from hermes_estop.process.estop import Estop
from hermes_estop.system.processes import group_remains, is_group_leader, same_process, signal_group

__all__ = [
    "CONSUMERS",
    "TERMINATED",
    "InFlight",
    "Survey",
    "covered_homes",
    "fleet_homes",
    "in_flight_counts",
    "in_flight_section",
    "survey",
    "terminate",
]

CONSUMERS = ("cron", "kanban", "gateway")
TERMINATED = "terminated by drain"
#: a card claimed this recently whose worker pid is not noted yet is still starting
_STARTING = timedelta(minutes=1)


@dataclass(frozen=True)
class InFlight:
    """One piece of work running now: a cron `job`, a kanban `card` or a gateway `turn`."""

    consumer: str
    kind: str
    name: str
    owner: str | None
    home: Path
    since: datetime | None
    pid: int | None
    #: the claim that owns the run (a cron claim token, a card's claim); None for a turn
    token: str | None = None
    #: the worker's process group, when it can be stopped by signal (not a gateway turn)
    group: int | None = None
    #: where the record lives: the cron table's home, the board's fleet root
    store: Path | None = None
    #: the worker's start time, recorded at spawn: `group` is signalled only while it matches
    started: int | None = None

    def age(self, now: datetime) -> timedelta | None:
        return None if self.since is None else max(timedelta(0), now - self.since)

    def describe(self, now: datetime) -> str:
        age = self.age(now)
        seconds = f", {int(age.total_seconds())}s" if age is not None else ""
        return f"{self.kind} {self.name} (owner {self.owner or '-'}{seconds})"

    def to_json(self, now: datetime) -> dict[str, Any]:
        age = self.age(now)
        return {"consumer": self.consumer, "kind": self.kind, "name": self.name, "owner": self.owner,
                "home": str(self.home), "since": format_instant(self.since), "pid": self.pid,
                "age_seconds": None if age is None else round(age.total_seconds(), 3)}


@dataclass(frozen=True)
class Survey:
    """What is in flight, and what could not be read (a damaged table: not known to be quiet)."""

    items: tuple[InFlight, ...]
    problems: tuple[str, ...]

    @property
    def quiet(self) -> bool:
        return not self.items and not self.problems

    def counts(self) -> dict[str, int]:
        return {consumer: sum(1 for item in self.items if item.consumer == consumer) for consumer in CONSUMERS}


def fleet_homes(estop: Estop) -> tuple[Path, ...]:
    """The fleet root and every profile home under it (valid profile names only)."""
    root = estop.layout.root
    homes = [root]
    try:
        entries = sorted(os.listdir(root / PROFILES_DIR))
    except OSError:
        entries = []
    for name in entries:
        try:
            validate_profile_name(name)
        except InvalidArgument:
            continue
        if (root / PROFILES_DIR / name).is_dir():
            homes.append(root / PROFILES_DIR / name)
    return tuple(homes)


def covered_homes(estop: Estop, fleet: bool) -> tuple[tuple[Path, ...], str | None, bool]:
    """The homes a hold covers (`fleet`, or a hold in `estop`'s own home), the profile whose
    work elsewhere it also covers (cards assigned to it, cron jobs naming it), and whether it
    covers everything (a fleet-wide hold)."""
    layout = estop.layout
    if fleet or layout.own == layout.fleet:
        return fleet_homes(estop), None, True
    return (layout.home,), layout.profile, False


def _cron(home: Path, now: datetime, only: str | None = None) -> list[InFlight]:
    """The running jobs of `home`'s table (with `only`, those naming that profile)."""
    table = CronTable(home)
    if not table.exists():
        return []
    found = []
    for job in table.jobs():
        claim = job.claim
        if claim is None or not job.running(now) or (only is not None and job.profile != only):
            continue
        pid = claim.worker or claim.pid
        if _running(pid, claim.worker_start if claim.worker else None):
            found.append(InFlight("cron", "job", job.name, job.owner, home, claim.since, pid, claim.token,
                                  claim.worker, home, claim.worker_start))
    return found


def _kanban(root: Path, profile: str | None, every: bool, now: datetime) -> list[InFlight]:
    board = Board(root)
    if not board.exists():
        return []
    found = []
    for card in board.cards("running"):
        if not every and (profile is None or card.profile != profile):
            continue
        if card.pid is not None:
            if not _running(card.pid, card.pid_start):
                continue
        elif card.started_at is None or now - card.started_at >= _STARTING:
            continue
        home = root / PROFILES_DIR / card.profile if card.profile else root
        found.append(InFlight("kanban", "card", f"#{card.id}", card.owner, home, card.started_at, card.pid,
                              card.claim, card.pid, root, card.pid_start))
    return found


def survey(estop: Estop, *, fleet: bool = False, now: datetime | None = None) -> Survey:
    """Everything in flight on the locations `estop`'s own hold (or, with `fleet`, the fleet
    root's) covers. Never raises for a damaged file: it is listed as a problem."""
    now = estop.clock() if now is None else now
    homes, profile, every = covered_homes(estop, fleet)
    items: list[InFlight] = []
    problems: list[str] = []
    readers: list[tuple[Callable[..., list[InFlight]], tuple[Any, ...]]] = [(_cron, (home, now)) for home in homes]
    if profile is not None:  # a job in another home's table that names this profile runs under its hold too
        readers += [(_cron, (home, now, profile)) for home in fleet_homes(estop) if home not in homes]
    readers.append((_kanban, (estop.layout.root, profile, every, now)))
    for reader, args in readers:
        try:
            items += reader(*args)
        except (StoreError, OSError) as exc:
            problems.append(one_line(exc))
    for home in homes:
        items += [InFlight("gateway", "turn", turn.id, turn.user, home, turn.since, turn.pid)
                  for turn in read_turns(home)]
    return Survey(tuple(items), tuple(problems))


def in_flight_counts(estop: Estop, *, fleet: bool = False) -> dict[str, int]:
    """The count of work in flight per consumer (`cron`, `kanban`, `gateway`) on what `estop`'s
    own hold (or the fleet root's) covers: for `hermes status`."""
    return survey(estop, fleet=fleet).counts()


def in_flight_section(estop: Estop, now: datetime | None = None) -> dict[str, Any]:
    """`{"json": {"in_flight": {"cron": n, "kanban": n, "gateway": n}}, "lines": [...]}` for
    `hermes status` (the same shape as the windows' section): the work in flight on what this
    home's hold covers, and what could not be read."""
    found = survey(estop, now=now)
    counts = found.counts()
    line = "in flight: " + ", ".join(f"{counts[consumer]} {consumer}" for consumer in CONSUMERS)
    lines = [line] + [f"in flight: cannot tell: {problem}" for problem in found.problems]
    return {"json": {"in_flight": counts, "in_flight_problems": list(found.problems)}, "lines": lines}


def _running(pid: int, started: int | None) -> bool:
    """The recorded process is still alive: a pid whose start time differs from the recorded one
    is a stranger, so what was recorded is gone."""
    return pid_alive(pid) and (started is None or same_process(pid, started))


def terminate(items: tuple[InFlight, ...], now: datetime, *, grace: float = KILL_GRACE,
              monotonic: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
              ) -> list[InFlight]:
    """SIGTERM every worker process group among `items`, SIGKILL those still there after
    `grace` seconds, and record each run `failed` with the reason "terminated by drain". Only a
    worker identified by pid AND start time is signalled (a stranger that reused the pid, or a
    record without a start time, is left alone and not returned); a gateway turn is not a
    process of its own and is left alone. Returns what was stopped."""
    targets = [item for item in items if item.group is not None and is_group_leader(item.group, item.started)]
    # Recorded first: the dispatcher or ticker that owns the worker records its end too, and
    # finds the claim no longer its own, so the reason stays "terminated by drain". A record
    # waits for a busy table or board only briefly: the drain's own timeout comes first.
    for item in targets:
        _record_terminated(item, now)
    groups = [(item.group, item.started) for item in targets if item.group is not None]
    for group, started in groups:
        signal_group(group, started, signal.SIGTERM)
    end = monotonic() + grace
    while monotonic() < end and any(group_remains(group, started) for group, started in groups):
        sleep(0.05)
    for group, started in groups:
        signal_group(group, started, signal.SIGKILL, leader_may_have_ended=True)
    return targets


def _record_terminated(item: InFlight, now: datetime) -> None:
    started = item.since or now
    result = WorkResult("failed", None, started, now, TERMINATED)
    if item.store is None or item.token is None:
        return
    try:
        if item.consumer == "cron":
            with CronTable(item.store).edit(wait=READ_WAIT) as jobs:
                for i, job in enumerate(jobs):
                    if job.name == item.name and job.claim is not None and job.claim.token == item.token:
                        jobs[i] = replace(job, last=result, claim=None)
        elif item.consumer == "kanban":
            Board(item.store, busy_timeout=READ_WAIT).finish(int(item.name.lstrip("#")), item.token, result)
    except (StoreError, OSError, ValueError):
        pass  # the worker is stopped all the same; its owner records its end
