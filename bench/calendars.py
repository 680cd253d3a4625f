"""A calendar of 1,000 recurring events: parsed and expanded for 30 days (issue 27). The target
is under 1 s; the CPU time is printed too, as the wall time on a shared machine says little.
Then (issue 32 item 7, issue 33 item 5) the first scheduler pass that arms an ordinary window,
with a hostile feed beside it (a rule that never matches; 400 daily rules from 1970) and
without: the target is under 1 s more than without.

    python bench/calendars.py   (measures the package installed in the running venv)
"""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hermes_estop.windows.ical import parse_feed

FREQS = ("WEEKLY", "WEEKLY;BYDAY=MO,TH", "MONTHLY", "DAILY;INTERVAL=7", "WEEKLY;INTERVAL=2")


def calendar(events: int = 1000) -> bytes:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//bench//EN", "X-WR-TIMEZONE:Europe/Berlin"]
    for i in range(events):
        lines += ["BEGIN:VEVENT", f"UID:event-{i}@bench", "DTSTAMP:20250101T000000Z",
                  f"DTSTART;TZID=Europe/Berlin:2025{i % 12 + 1:02d}{i % 28 + 1:02d}T{i % 24:02d}{i % 60:02d}00",
                  "DURATION:PT2H", f"RRULE:FREQ={FREQS[i % len(FREQS)]}", f"SUMMARY:maintenance {i}", "END:VEVENT"]
    lines.append("END:VCALENDAR")
    return "\r\n".join(lines).encode()


def main() -> None:
    raw = calendar()
    now = datetime(2026, 6, 1, tzinfo=UTC)
    best = cpu = float("inf")
    for _ in range(3):
        started, started_cpu = time.perf_counter(), time.process_time()
        feed = parse_feed(raw, "'bench'", now=now)
        count = sum(1 for _ in feed.events(now, lookahead=timedelta(days=30)))
        best = min(best, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
    print(f"1,000 recurring events ({len(raw) // 1024} KiB): parsed and expanded for 30 days "
          f"({count} occurrences) in {best:.3f} s (best of 3; CPU {cpu:.3f} s)")


HOSTILE = {
    "a rule that never matches": ["BEGIN:VEVENT", "UID:never", "DTSTAMP:20260101T000000Z", "DTSTART:20260101T000000Z",
                                  "DURATION:PT1H", "RRULE:FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30", "END:VEVENT"],
    "400 daily rules from 1970": [line for i in range(400) for line in (
        "BEGIN:VEVENT", f"UID:d{i}", "DTSTAMP:20260101T000000Z", "DTSTART:19700101T000000Z", "DURATION:PT1H",
        "RRULE:FREQ=DAILY", "END:VEVENT")],
}


def first_pass(events: list[str] | None) -> float:
    """Seconds of the first pass arming a window covering now, `events` as a calendar beside it."""
    from hermes_estop import Estop
    from hermes_estop.windows import calendars
    from hermes_estop.windows.scheduler import WindowService

    calendars._FEEDS.clear()

    with tempfile.TemporaryDirectory() as home:
        root = Path(home)
        toml = '[[windows]]\nname = "now"\ncron = "* * * * *"\nduration = "1h"\n'
        if events is not None:
            body = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//bench//EN", *events, "END:VCALENDAR"]
            (root / "hostile.ics").write_bytes("\r\n".join(body).encode())
            toml += '\n[[calendars]]\nname = "hostile"\nics = "hostile.ics"\n'
        (root / "windows.toml").write_text(toml)
        estop = Estop(root=root, home=root)
        service = WindowService(estop.fleet)
        started = time.perf_counter()
        report = service.tick()
        took = time.perf_counter() - started
        assert any(event.kind == "arm" for event in report.events), report.to_json()
        return took


def arming_beside_hostile_feeds() -> None:
    import logging

    logging.getLogger("hermes_estop").setLevel(logging.CRITICAL)  # the refusals' ERROR lines
    plain = min(first_pass(None) for _ in range(3))
    for name, events in HOSTILE.items():
        took = min(first_pass(events) for _ in range(3))
        print(f"first pass arming a window beside a feed with {name} (refused): {took:.3f} s "
              f"(without the feed {plain:.3f} s; target: under 1 s more)")


if __name__ == "__main__":
    main()
    arming_beside_hostile_feeds()
