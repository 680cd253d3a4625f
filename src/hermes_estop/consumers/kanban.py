"""kanban: the fleet's board (`board.Board`, `<root>/kanban.db`) and a dispatcher that spawns a
worker for each ready card the gate lets through (docs/design.md §7).

A card is gated by its owner and its assignee profile on every location its worker runs under:
a card with a profile runs with that profile's home, so it asks that profile's candidates (its
home and the fleet root); a card without one runs in the fleet root and asks the fleet root's.
A held card is never touched: it stays `ready`. Cards whose owner and profile the gate admits
are spawned through the hold (the maintenance lane). A card the dispatcher cannot use (an
invalid profile written into the database by hand) is parked, `failed` with the reason, and the
pass goes on with the others.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from hermes_estop.consumers.board import BOARD_NAME, STATUSES, Board, Card, UnknownCard, claim_token
from hermes_estop.consumers.pass_report import Held, PassReport, RecordedRun
from hermes_estop.consumers.passgate import PassGate
from hermes_estop.consumers.validate import parse_timeout
from hermes_estop.consumers.worker import WorkerPool, WorkResult, worker_env
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import format_instant
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import child_environment
from hermes_estop.system.processes import start_time

__all__ = [
    "BOARD_NAME",
    "STATUSES",
    "Board",
    "Card",
    "CardRun",
    "DispatchReport",
    "Dispatcher",
    "HeldCard",
    "UnknownCard",
]

#: what this consumer gates as, for scoped holds (`hermes pause --only kanban`)
COMPONENT = "kanban"

#: a held card (`.id`, `.notice`) and a recorded run (`.id`, `.result`): the shared shapes
HeldCard = Held
CardRun = RecordedRun


@dataclass(frozen=True)
class DispatchReport(PassReport):
    """What one pass did: `spawned` the cards it claimed and started, `held` the ready cards
    the gate refused (left ready), `waiting` admitted ready cards beyond the limit, `taken` the
    cards another dispatcher claimed first, `finished` the results recorded (parked cards
    among them, status "error"), `lost` the running cards found abandoned by a dead dispatcher."""

    noun: ClassVar[str] = "card"
    now: datetime
    spawned: tuple[int, ...] = ()
    held: tuple[Held, ...] = ()
    waiting: tuple[int, ...] = ()
    taken: tuple[int, ...] = ()
    finished: tuple[RecordedRun, ...] = ()
    lost: tuple[int, ...] = ()

    @property
    def launched(self) -> tuple[Hashable, ...]:
        return self.spawned

    @staticmethod
    def label(key: Any) -> str:
        return f"#{key}"

    def summary(self) -> str:
        parts = [f"{len(self.spawned)} spawned", f"{len(self.held)} held"]
        if self.finished:
            parts.append(f"{len(self.finished) - len(self.failed)} done, {len(self.failed)} failed")
        if self.waiting:
            parts.append(f"{len(self.waiting)} waiting for a slot")
        if self.lost:
            parts.append(f"{len(self.lost)} lost")
        return "kanban dispatch: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        done = {run.key for run in self.finished}
        return {
            "now": format_instant(self.now),
            "spawned": len(self.spawned),
            "held": len(self.held),
            "waiting": len(self.waiting),
            "done": len(self.finished) - len(self.failed),
            "failed": len(self.failed),
            "cards": (
                [{"id": run.key, "outcome": "done" if run.result.ok else "failed", "result": run.result.to_json()}
                 for run in self.finished]
                + [{"id": id_, "outcome": "running"} for id_ in self.spawned if id_ not in done]
                + [{"id": held.key, "outcome": "held", "notice": held.notice} for held in self.held]
                + [{"id": id_, "outcome": "waiting"} for id_ in self.waiting]
                + [{"id": id_, "outcome": "taken"} for id_ in self.taken]
                + [{"id": id_, "outcome": "lost"} for id_ in self.lost]
            ),
        }


def card_names(card: Card) -> tuple[str, ...]:
    """The names a scoped hold's `jobs` globs match a card by: its assignee profile and its title."""
    return (card.profile, card.title) if card.profile is not None else (card.title,)


class Dispatcher:
    """Dispatch passes over the fleet's board, gated per card. Keeps its workers, so a service can
    run passes without waiting (`wait=False`) while `max_workers` bounds how many run at once."""

    def __init__(self, estop: Estop, board: Board | None = None, max_workers: int = 4,
                 timeout: timedelta | str | None = timedelta(hours=1), *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise InvalidArgument(f"invalid worker limit {max_workers!r}: expected a whole number of at least 1")
        self.estop = estop
        self.max_workers = max_workers
        self.timeout = parse_timeout(timeout)
        self.fleet = estop.for_fleet()
        self.board = board if board is not None else Board(estop.layout.root, clock=estop.clock)
        self.pool = WorkerPool(estop.clock, monotonic)
        self._claims: dict[int, str] = {}
        self._started = start_time(os.getpid())

    def pass_gate(self) -> PassGate:
        """The gate one pass decides its cards with: `gate(card.owner, card.profile, "kanban",
        card_names(card))` on the fleet root's candidates and the card's profile's."""
        return PassGate(self.fleet, component=COMPONENT)

    def tick(self, now: datetime | None = None, *, limit: int | None = None, wait: bool = False) -> DispatchReport:
        """One pass: record ended workers, fail lost cards, then claim and spawn admitted ready
        cards while slots remain (`limit` per pass; at most `max_workers` in flight)."""
        now = self.estop.clock() if now is None else now
        finished = self._record(self.pool.reap())
        if not self.board.exists():
            return DispatchReport(now, finished=tuple(finished))
        lost = self.board.fail_lost(now, frozenset(self._claims.values()))
        slots = self.max_workers - len(self.pool)
        if limit is not None:
            slots = min(slots, limit)
        spawned: list[int] = []
        held: list[Held] = []
        waiting: list[int] = []
        taken: list[int] = []
        gate = self.pass_gate()
        for card in self.board.cards("ready"):
            try:
                verdict = gate(card.owner, card.profile, card_names(card))
            except InvalidArgument as exc:
                finished += self._park(card, one_line(exc), now)
                continue
            if not verdict:
                held.append(Held(card.id, gate.notice(verdict)))
                continue
            if len(spawned) >= slots:
                waiting.append(card.id)
                continue
            token = claim_token(os.getpid(), self._started, uuid.uuid4().hex)  # names its dispatcher
            if not self.board.claim(card.id, token, now, now + self.timeout):
                taken.append(card.id)
                continue
            self._claims[card.id] = token
            self._spawn(card, token)
            spawned.append(card.id)
        finished += self._record(self.pool.wait_all() if wait else self.pool.reap())
        return DispatchReport(now, tuple(spawned), tuple(held), tuple(waiting), tuple(taken), tuple(finished),
                              tuple(lost))

    def dispatch(self, now: datetime | None = None, *, limit: int | None = None) -> DispatchReport:
        """One pass that waits for the workers it spawned and records them (`hermes kanban dispatch`)."""
        return self.tick(now, limit=limit, wait=True)

    def drain(self, timeout: float | None = None) -> list[RecordedRun]:
        """Wait (up to `timeout` seconds) for the workers in flight and record them; those still
        running are left running and are marked lost once they ended unrecorded and their deadline
        passed (`board.abandoned`)."""
        return self._record(self.pool.wait_all(timeout))

    def _park(self, card: Card, reason: str, now: datetime) -> list[RecordedRun]:
        if not self.board.park(card.id, reason, now):
            return []  # someone else moved it meanwhile
        return [RecordedRun(card.id, WorkResult("error", None, now, now, reason))]

    def _spawn(self, card: Card, token: str) -> None:
        layout = self.estop.layout
        home = layout.for_profile(card.profile).home if card.profile else layout.root
        worker = self.pool.start(
            card.id,
            card.command,
            timeout=self.timeout,
            cwd=layout.root,
            env=worker_env(child_environment(), {
                "HERMES_HOME": str(home),
                "HERMES_ROOT": str(layout.root),
                "HERMES_KANBAN_CARD": str(card.id),
                "HERMES_KANBAN_OWNER": None if card.owner is None else str(card.owner),
            }),
            log_path=self.board.log_dir / f"{card.id}.log",
        )
        if worker.pid is not None:
            self.board.note_worker(card.id, token, worker.pid, worker.process_start)

    def _record(self, done: list[tuple[Any, WorkResult]]) -> list[RecordedRun]:
        runs = []
        for card_id, result in done:
            token = self._claims.pop(card_id, None)
            if token is not None:
                self.board.finish(card_id, token, result)
            runs.append(RecordedRun(card_id, result))
        return runs
