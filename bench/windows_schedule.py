"""Cold and warm figures of every windows command and `status` on fleets of distinct windows
(issues 35 and 45), as real processes of the installed `hermes`.

FIRST is the first command on a new fleet (nothing compiled yet; `status` unless `--first`
names another); COLD is the first command after an edit of `windows.toml`; WARM is the same
command run again with the file unchanged; and `status` after an edit that `hermes serve
--once` read first (serve builds the schedule for operators). The edit (`--edit`, one or more,
each measured on its own):

- `every`: the file rewritten with every window's start minute moved (EVERY table changed, the
  windows still distinct: issue 45's cold case);
- `one`: one window's reason changed (a one-table edit, the smaller figure);
- `comment`: a comment line appended (the bytes change, no table does: the figure before issue 45).

Each figure is (seconds, peak MiB, CPU seconds) of one process. `--baseline VENV` measures a
second install (a venv directory, or its `hermes` script) in the same run: each install on its
own copy of the fleet (its kept schedule and cache its own), every edit made to both, and every
process of one run beside the same process of the other, the order alternating; each time (wall
and CPU) gets its ratio current / baseline. The machine is shared, so compare ratios from one run rather than figures
across runs.

With `--calendar 1000 [--calendar-windows 0 10000]`, the same on a fleet with a calendar of 1,000
recurring events (and that many windows beside it), COLD being the first command after the feed
changed, and then the first command after each `--edit` of `windows.toml`.

Run: `python bench/windows_schedule.py --sizes 10000 [--big 100000] [--baseline ../base/.venv]
--out FILE` from a fresh non-editable venv (`pip install .`), bench/ on sys.path. A quick check:
`--sizes 2000 --commands status`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calendars import calendar
from core import _script
from harness import spawn_measured
from windows import distinct_text, write_distinct

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
EDITS = ("every", "one", "comment")
AFTER_SERVE = "status after an edit that `serve --once` read first"

Figures = dict[str, float]


@dataclass(frozen=True)
class Install:
    """One install of hermes-estop measured: its name in the results and its console script."""

    name: str
    hermes: str


def installs_of(baseline: str | None) -> list[Install]:
    """This venv's install ("current"), after the baseline's when one is named."""
    current = Install("current", _script("hermes"))
    if baseline is None:
        return [current]
    path = Path(baseline)
    script = path / "bin" / "hermes" if path.is_dir() else path
    if not script.is_file():
        raise SystemExit(f"--baseline {baseline}: no hermes script at {script}")
    return [Install("baseline", str(script)), current]


class Fleet:
    """One fleet of `count` distinct windows, copied once per install (each keeps its own compiled
    schedule beside its file and its own cache: one install never reads the other's), edited
    alike. The text is a function of the edits made so far: every window's start moved `shift`
    minutes, the first window's reason marked with the `one`-edit count, `comments` comment
    lines at the end, and `tail` (a `[[calendars]]` table) after the windows."""

    def __init__(self, tmp: Path, tag: str, count: int, installs: Sequence[Install], tail: str = "") -> None:
        self.count, self.tail, self.installs = count, tail, list(installs)
        self.shift = self.marked = self.comments = 0
        self.roots = {install.name: tmp / f"{tag}-{install.name}" for install in installs}
        self.caches = {install.name: tmp / f"{tag}-{install.name}-cache" for install in installs}
        for root in self.roots.values():
            write_distinct(root, 0)  # the profiles' homes
        self._write()

    def _write(self) -> None:
        text = distinct_text(self.count, shift=self.shift, first_reason=f" (edit {self.marked})" if self.marked else "")
        text += self.tail + "".join(f"# edit {n}\n" for n in range(1, self.comments + 1))
        for root in self.roots.values():
            (root / "windows.toml").write_text(text)

    def edit(self, kind: str) -> None:
        if self.count == 0:  # no window to change (a calendar alone): the bytes change by a comment
            kind = "comment"
        if kind == "every":
            self.shift += 1  # a shift of 60 would give the first file back: no run edits that often
        elif kind == "one":
            self.marked += 1
        else:
            self.comments += 1
        self._write()

    def write_feed(self, data: bytes) -> None:
        for root in self.roots.values():
            (root / "feed.ics").write_bytes(data)

    def run(self, install: Install, args: list[str]) -> tuple[float, float, float]:
        """(seconds, peak MiB, CPU seconds) of one `hermes ARGS` process of `install` on its copy
        (the CPU, user and system, of it and its small launcher: the machine is shared, and a
        process's CPU time varies less with the load than its wall time)."""
        # $HERMES_ESTOP_CACHE: the per-user cache, kept per fleet so a run starts empty (the code
        # after issue 35 keeps a schedule there only for a fleet root its group can write)
        root = self.roots[install.name]
        env = dict(os.environ, HERMES_ROOT=str(root), HERMES_HOME=str(root),
                   HERMES_ESTOP_CACHE=str(self.caches[install.name]))
        env.pop("HERMES_ESTOP_STORE", None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed, peak, code = spawn_measured([install.hermes, *args], env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if code not in (0, 1):
            raise SystemExit(f"{install.name}: hermes {' '.join(args)} exited {code}")
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        return round(elapsed, 3), round(peak, 1), round(cpu, 3)

    def each(self, turn: int, measure: Callable[[Install], Figures]) -> dict[str, Figures]:
        """`measure(install)` for every install, the first going first on even turns and last on
        odd ones (a drift of the machine weighs on both alike)."""
        order = self.installs if turn % 2 == 0 else self.installs[::-1]
        done = {install.name: measure(install) for install in order}
        return {install.name: done[install.name] for install in self.installs}


def with_ratios(figures: dict[str, Figures]) -> dict[str, object]:
    """Per install figures, and each time's ratio current / baseline when both were measured."""
    out: dict[str, object] = dict(figures)
    if "baseline" in figures:
        base, current = figures["baseline"], figures["current"]
        for key, value in current.items():
            if key.endswith("_s") and key in base:
                out[f"ratio_{key}"] = round(value / max(base[key], 1e-9), 3)
    return out


def _figures(kind: str, measured: tuple[float, float, float]) -> Figures:
    return {f"{kind}_s": measured[0], f"{kind}_mib": measured[1], f"{kind}_cpu_s": measured[2]}


def first_read(fleet: Fleet, args: list[str]) -> dict[str, object]:
    return with_ratios(fleet.each(0, lambda install: _figures("cold", fleet.run(install, args))))


def cold_and_warm(fleet: Fleet, labels: Sequence[str], edit: Callable[[], None], tag: object) -> dict[str, object]:
    """Each command of `labels`: COLD right after `edit()` (every install's first process after
    it), WARM the faster of two runs after that."""
    out: dict[str, object] = {}
    turn = 0
    for label, args in COMMANDS:
        if label not in labels:
            continue
        edit()
        cold = fleet.each(turn, lambda install, args=args: _figures("cold", fleet.run(install, args)))
        warm = [fleet.each(turn + 1 + n, lambda install, args=args: _figures("warm", fleet.run(install, args)))
                for n in range(2)]
        figures = {name: {**cold[name], **min((w[name] for w in warm), key=lambda f: f["warm_s"])} for name in cold}
        out[label] = with_ratios(figures)
        print(tag, label, out[label], flush=True)
        turn += 1
    return out


def after_serve(fleet: Fleet, kind: str, tag: object) -> dict[str, object]:
    """`status` right after a `serve --once` of the same install read an edit of `kind`."""
    fleet.edit(kind)

    def one(install: Install) -> Figures:
        fleet.run(install, ["serve", "--once"])
        return _figures("warm", fleet.run(install, ["status"]))

    figures = with_ratios(fleet.each(0, one))
    print(tag, AFTER_SERVE, figures, flush=True)
    return figures


def measure(tmp: Path, count: int, labels: Sequence[str], edits: Sequence[str], installs: Sequence[Install],
            first: str) -> dict[str, object]:
    fleet = Fleet(tmp, f"fleet-{count}", count, installs)
    out: dict[str, object] = {f"first read of a new fleet ({first})": first_read(fleet, first.split())}
    print(count, "first", out, flush=True)
    for kind in edits:
        tag = f"{count}, {kind} edit"
        figures = cold_and_warm(fleet, labels, lambda kind=kind: fleet.edit(kind), tag)
        figures[AFTER_SERVE] = after_serve(fleet, kind, tag)
        out[f"after an edit: {kind}"] = figures
    return out


#: the commands measured on a fleet with a calendar (issue 35: "1,000 recurring events counted as windows")
CALENDAR_COMMANDS = ("windows list", "windows next", "status", "windows validate", "check --at now+1d --for 6h")


def measure_calendar(tmp: Path, events: int, windows: int, edits: Sequence[str], installs: Sequence[Install],
                     labels: Sequence[str]) -> dict[str, object]:
    """The calendar commands on a fleet whose windows.toml has one `[[calendars]]` of `events`
    recurring events (and `windows` distinct windows beside it); COLD is the first command
    after the feed changed, then the first command after each edit of windows.toml."""
    fleet = Fleet(tmp, f"calendar-{events}-{windows}", windows, installs,
                  tail='\n[[calendars]]\nname = "maintenance"\nics = "feed.ics"\n')
    feeds = [0]

    def edit_feed() -> None:
        """The feed's bytes changed (its PRODID), so every key derived from them changes."""
        feeds[0] += 1
        fleet.write_feed(calendar(events).replace(b"-//bench//EN", f"-//bench//EN {feeds[0]}".encode()))

    tag = f"calendar of {events} events + {windows} windows"
    edit_feed()
    out: dict[str, object] = {"first read of a new fleet (windows validate)": first_read(fleet, ["windows", "validate"])}
    print(tag, "first", out, flush=True)
    for label, figures in cold_and_warm(fleet, labels, edit_feed, tag).items():
        out[f"{label} (after a feed edit)"] = figures
    for kind in edits:
        for label, figures in cold_and_warm(fleet, labels, lambda kind=kind: fleet.edit(kind),
                                            f"{tag}, windows.toml edited ({kind})").items():
            out[f"{label} (after an edit of windows.toml: {kind})"] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000])
    parser.add_argument("--big", type=int, nargs="*", default=[])
    parser.add_argument("--edit", nargs="+", choices=EDITS, default=["every", "one"],
                        help="what COLD follows (each measured on its own): every table changed, one, a comment")
    parser.add_argument("--commands", nargs="+", choices=[label for label, _ in COMMANDS], default=None,
                        help="only these commands (default: all; at --big sizes: windows validate and status)")
    parser.add_argument("--first", default="status", help="the first command on a new fleet (default: status)")
    parser.add_argument("--baseline", default=None,
                        help="a second install measured in the same run: a venv directory or its hermes script")
    parser.add_argument("--calendar", type=int, default=0, help="also a fleet with a calendar of this many events")
    parser.add_argument("--calendar-windows", type=int, nargs="*", default=[0],
                        help="the distinct windows beside the calendar, one fleet per count")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    installs = installs_of(args.baseline)
    chosen = tuple(args.commands or (label for label, _ in COMMANDS))
    results: dict[str, object] = {"installs": {install.name: install.hermes for install in installs},
                                  "edits": list(args.edit)}
    with tempfile.TemporaryDirectory() as name:
        for count in args.sizes:
            results[str(count)] = measure(Path(name), count, chosen, args.edit, installs, args.first)
        for count in args.big:
            big = tuple(label for label in BIG_COMMANDS if label in chosen) if args.commands else BIG_COMMANDS
            results[str(count)] = measure(Path(name), count, big, args.edit, installs, args.first)
        for count in args.calendar_windows if args.calendar else ():
            results[f"calendar {args.calendar} events + {count} windows"] = measure_calendar(
                Path(name), args.calendar, count, args.edit, installs,
                tuple(label for label in CALENDAR_COMMANDS if label in chosen))
    args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
