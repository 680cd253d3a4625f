"""Constants the consumer tests share (the fixtures are in conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["T0", "finishes"]

#: where the fake clock starts in these tests: 10:00 UTC, so "*/5" occurrences fall at 10:05, 10:10 ...
T0 = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)


def finishes(call, *, guard: float = 60.0):
    """Run `call()` in a thread and return what it returned or raised (as `("raised", exc)`);
    fails the test instead of hanging the suite when the call blocks (a FIFO opened blindly).
    The guard is a hang detector, not a timing assertion: it is far above any real run."""
    import threading

    outcome: list = []

    def run():
        try:
            outcome.append(("returned", call()))
        except BaseException as exc:
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(guard)
    assert not thread.is_alive(), "the call blocked (it opened a FIFO without O_NONBLOCK?)"
    return outcome[0]


def at(hour: int, minute: int, second: int = 0) -> datetime:
    """T0's day at that time of day."""
    return T0.replace(hour=hour, minute=minute, second=second)
