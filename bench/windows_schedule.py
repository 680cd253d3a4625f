"""Cold and warm figures of every windows command and `status` on fleets of distinct windows
(issue 35), as real processes of the installed `hermes`.

FIRST is the first command on a new fleet (nothing compiled yet); COLD is the first command
after an edit of `windows.toml` (a comment line appended, so the bytes, and every key derived
from them, change); WARM is the same command run again with the file unchanged; and `status`
after an edit that `hermes serve --once` read first (serve builds the schedule for operators).
Each figure is (seconds, peak MiB) of one process; the machine is shared, so compare ratios
from one run rather than figures across runs.

With `--calendar 1000 [--calendar-windows 0 10000]`, the same on a fleet with a calendar of 1,000
recurring events (and that many windows beside it), COLD being the first command after the feed
changed, and then the first command after an edit of `windows.toml`.

Run: `python bench/windows_schedule.py --sizes 10000 [--big 100000] --out FILE` from a fresh
non-editable venv (`pip install .`), bench/ on sys.path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calendars import calendar
from core import _script
from harness import spawn_measured
from windows import write_distinct

#: an instant inside the compiled schedule's horizon (a week from its build), on the hour
INSIDE = (datetime.now(UTC) + timedelta(days=1)).replace(minute=0, second=0, microsecond=0).isoformat()
COMMANDS = (("windows list", ["windows", "list"]), ("windows next", ["windows", "next"]),
            ("status", ["status"]), ("windows validate", ["windows", "validate"]),
            ("check --at now+1d --for 6h", ["check", "--at", INSIDE, "--for", "6h"]),
            # past the horizon: every window asked of the exact functions (croniter), as before
            ("check --at T --for 6h (T past the horizon: the exact path)",
             ["check", "--at", "2027-03-01T00:00:00Z", "--for", "6h"]),
            ("serve --once", ["serve", "--once"]))
#: the commands measured at the large size (each cold one costs up to a minute before issue 35)
BIG_COMMANDS = ("windows validate", "status")


def _process(root: Path, args: list[str], cache: Path) -> tuple[float, float]:
    # $HERMES_ESTOP_CACHE: the per-user cache, kept per fleet so a run starts empty (the code
    # after issue 35 keeps a schedule there only for a fleet root its group can write)
    env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root), HERMES_ESTOP_CACHE=str(cache))
    env.pop("HERMES_ESTOP_STORE", None)
    elapsed, peak, code = spawn_measured([_script("hermes"), *args], env)
    if code not in (0, 1):
        raise SystemExit(f"hermes {' '.join(args)} exited {code}")
    return round(elapsed, 3), round(peak, 1)


def _edit(root: Path, counter: list[int]) -> None:
    counter[0] += 1
    with open(root / "windows.toml", "a", encoding="utf-8") as out:
        out.write(f"# edit {counter[0]}\n")


def cold_and_warm(root: Path, cache: Path, labels: tuple[str, ...], edit: Callable[[], None],
                  tag: object) -> dict[str, dict[str, object]]:
    """Each command of `labels`: COLD right after `edit()`, WARM the faster of two runs after it."""
    out: dict[str, dict[str, object]] = {}
    for label, args in COMMANDS:
        if label not in labels:
            continue
        edit()
        cold = _process(root, args, cache)
        warm = min((_process(root, args, cache) for _ in range(2)), key=lambda pair: pair[0])
        out[label] = {"cold_s": cold[0], "cold_mib": cold[1], "warm_s": warm[0], "warm_mib": warm[1]}
        print(tag, label, out[label], flush=True)
    return out


def measure(tmp: Path, count: int, labels: tuple[str, ...]) -> dict[str, dict[str, object]]:
    root, cache = tmp / f"fleet-{count}", tmp / f"cache-{count}"
    write_distinct(root, count)
    counter = [0]
    out: dict[str, dict[str, object]] = {}
    first = _process(root, ["windows", "validate"], cache)
    out["first read of a new fleet (windows validate)"] = {"cold_s": first[0], "cold_mib": first[1]}
    print(count, "first", first, flush=True)
    out.update(cold_and_warm(root, cache, labels, lambda: _edit(root, counter), count))
    _edit(root, counter)
    _process(root, ["serve", "--once"], cache)
    after_serve = _process(root, ["status"], cache)
    out["status after an edit that `serve --once` read first"] = {"warm_s": after_serve[0], "warm_mib": after_serve[1]}
    print(count, "status after serve", after_serve, flush=True)
    return out


#: the commands measured on a fleet with a calendar (issue 35: "1,000 recurring events counted as windows")
CALENDAR_COMMANDS = ("windows list", "windows next", "status", "windows validate", "check --at now+1d --for 6h")


def _edit_feed(root: Path, events: int, counter: list[int]) -> None:
    """The feed's bytes changed (its PRODID), so every key derived from them changes."""
    counter[0] += 1
    (root / "feed.ics").write_bytes(calendar(events).replace(b"-//bench//EN", f"-//bench//EN {counter[0]}".encode()))


def measure_calendar(tmp: Path, events: int, windows: int) -> dict[str, dict[str, object]]:
    """The calendar commands on a fleet whose windows.toml has one `[[calendars]]` of `events`
    recurring events (and `windows` distinct windows beside it); COLD is the first command
    after the feed changed, then the first command after an edit of windows.toml."""
    root, cache = tmp / f"calendar-{events}-{windows}", tmp / f"calendar-cache-{events}-{windows}"
    write_distinct(root, windows)
    with open(root / "windows.toml", "a", encoding="utf-8") as out:
        out.write('\n[[calendars]]\nname = "maintenance"\nics = "feed.ics"\n')
    counter, edits = [0], [0]
    tag = f"calendar of {events} events + {windows} windows"
    _edit_feed(root, events, counter)
    first = _process(root, ["windows", "validate"], cache)
    out: dict[str, dict[str, object]] = {"first read of a new fleet (windows validate)": {"cold_s": first[0],
                                                                                          "cold_mib": first[1]}}
    print(tag, "first", first, flush=True)
    for label, figures in cold_and_warm(root, cache, CALENDAR_COMMANDS, lambda: _edit_feed(root, events, counter),
                                        tag).items():
        out[f"{label} (after a feed edit)"] = figures
    for label, figures in cold_and_warm(root, cache, CALENDAR_COMMANDS, lambda: _edit(root, edits),
                                        f"{tag}, windows.toml edited").items():
        out[f"{label} (after an edit of windows.toml)"] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000])
    parser.add_argument("--big", type=int, nargs="*", default=[])
    parser.add_argument("--calendar", type=int, default=0, help="also a fleet with a calendar of this many events")
    parser.add_argument("--calendar-windows", type=int, nargs="*", default=[0],
                        help="the distinct windows beside the calendar, one fleet per count")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as name:
        for count in args.sizes:
            results[str(count)] = measure(Path(name), count, tuple(label for label, _ in COMMANDS))
        for count in args.big:
            results[str(count)] = measure(Path(name), count, BIG_COMMANDS)
        for count in args.calendar_windows if args.calendar else ():
            results[f"calendar {args.calendar} events + {count} windows"] = measure_calendar(Path(name), args.calendar,
                                                                                             count)
    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
