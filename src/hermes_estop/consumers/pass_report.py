"""What one pass of a consumer did, in the shape both consumers share: a cron tick and a kanban
dispatch pass each hold some items (with the notice), start some, and record the results of
others. The shared parts live here once: the held item, the recorded run, the human lines the
CLI prints and the lines `hermes serve` logs. Every human-facing line is escaped (`printable`):
a reason or a worker's output can never drive the terminal.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from hermes_estop.consumers.worker import WorkResult
from hermes_estop.model.text import printable

__all__ = ["Held", "PassReport", "RecordedRun", "log_pass"]


class _Keyed:
    """`key` is a cron job's name or a kanban card's id: also readable as `name` / `id`, the
    words each consumer's callers use."""

    key: Any

    @property
    def name(self) -> Any:
        return self.key

    @property
    def id(self) -> Any:
        return self.key


@dataclass(frozen=True)
class Held(_Keyed):
    """An item the gate refused this pass, and the notice it was refused with."""

    key: Any
    notice: str | None


@dataclass(frozen=True)
class RecordedRun(_Keyed):
    """A run recorded this pass: the item's key and how the run ended."""

    key: Any
    result: WorkResult


class PassReport:
    """The behaviour both pass reports share; they declare `now`, `held`, `finished` and what
    they started (`launched`)."""

    noun: ClassVar[str] = "item"
    now: datetime
    held: tuple[Held, ...]
    finished: tuple[RecordedRun, ...]

    @property
    def launched(self) -> tuple[Hashable, ...]:
        raise NotImplementedError

    @property
    def failed(self) -> tuple[RecordedRun, ...]:
        return tuple(run for run in self.finished if not run.result.ok)

    @staticmethod
    def label(key: Any) -> str:
        return str(key)

    def summary(self) -> str:
        raise NotImplementedError

    def lines(self) -> list[str]:
        """What the CLI prints for a person: the summary, each failure, the held items and the
        notice they were held with."""
        lines = [self.summary()]
        for run in self.failed:
            lines.append(f"  failed {printable(self.label(run.key))}: {printable(run.result.detail or run.result.status)}")
        if self.held:
            names = ", ".join(printable(self.label(held.key)) for held in self.held)
            lines.append(f"  held   {names}")
            lines.append(f"  {printable(self.held[0].notice or 'held')}")
        return lines


def log_pass(log: logging.Logger, service: str, report: PassReport) -> None:
    """What `hermes serve` logs for one pass: each start, each recorded result (a failure at
    WARNING). Held items are logged once per engagement by the caller (`Estop.check_paused`)."""
    for key in report.launched:
        log.info("%s: started %s %s", service, report.noun, printable(report.label(key)))
    for run in report.finished:
        level = logging.INFO if run.result.ok else logging.WARNING
        detail = f" ({printable(run.result.detail)})" if run.result.detail else ""
        log.log(level, "%s: %s %s %s%s", service, report.noun, printable(report.label(run.key)),
                run.result.status, detail)
