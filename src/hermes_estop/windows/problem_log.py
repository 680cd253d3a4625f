"""A problem logged once when it starts and once when it clears (issue 20 item 3, issue 32 item
6): a service that meets the same problem on every pass (a torn save, a failing calendar) logs
one ERROR line, then one INFO line when it is over, not a line per pass."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

__all__ = ["ProblemLog"]


class ProblemLog:
    """The problems standing now (kind -> message) of one service, on `logger`."""

    def __init__(self, logger: logging.Logger, *, quiet: bool = False) -> None:
        self.logger = logger
        self._standing: dict[str, str] = {}
        #: ERROR when a problem starts, INFO when it clears; `quiet`: both at DEBUG (another
        #: service beside this one logs the same problem: one problem, one line)
        self._started, self._ended = (logging.DEBUG, logging.DEBUG) if quiet else (logging.ERROR, logging.INFO)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._standing))

    def __contains__(self, kind: object) -> bool:
        return kind in self._standing

    def start(self, kind: str, message: str) -> None:
        """Log `message` as an ERROR when `kind` starts; while it lasts, a changed wording (an
        editor's torn saves fail at a new position each time) only at DEBUG."""
        if kind in self._standing:
            if self._standing[kind] != message:
                self._standing[kind] = message
                self.logger.debug("%s", message)
            return
        self._standing[kind] = message
        self.logger.log(self._started, "%s", message)

    def clear(self, kind: str, message: str) -> None:
        """Log once, as INFO, that the problem `kind` is over (nothing when there was none)."""
        if self._standing.pop(kind, None) is not None:
            self.logger.log(self._ended, "%s", message)

    def only(self, prefix: str, standing: Iterable[str], message: str) -> None:
        """Clear every problem of `prefix` whose rest is not in `standing`; `message` is
        formatted with that rest."""
        keep = set(standing)
        for kind in self:
            if kind.startswith(prefix) and kind[len(prefix):] not in keep:
                self.clear(kind, message.format(kind[len(prefix):]))
