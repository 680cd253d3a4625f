"""The compiled schedule of one calendar feed (issue 35): a feed's events near the present,
kept beside the fleet's copies of its feeds so no command parses the feed again.

Why: a calendar of 1,000 recurring events costs every command that reads `windows.toml` about
two seconds (icalendar parses it, recurring_ical_events expands the weeks around now), however
often the feed has been read before. Its events over the weeks a command asks about are the
same for every process until the feed's bytes change, so the first process to parse them keeps
them, as the windows file's schedule keeps its windows' occurrences (`windows.schedule`).

- **What it holds**: the events of the feed's expansion chunks (`ical.CHUNK`) from the one
  holding `now - longest` (what `Feed.probe` asks first) to the one holding `now + HORIZON`,
  exactly as `Feed.chunk` yields them, and the zone each event's UID is shown in.
- **Its key**: the SHA-256 of the feed's bytes and of the settings that read them (the label its
  events are named by, the source's filters and zone: the `salt`), the stamp of the code that
  read them and the SHA-256 of the TZif data of every zone it names (`windows.kept_files`). Any
  difference and the feed is parsed and compiled again.
- **What it answers**: a `CompiledFeed` is a `Feed` whose compiled chunks are answered from
  the file; a chunk outside them (a question years ahead, a holiday lookup of a whole year) is
  asked of the feed parsed then, once, exactly as before. It is an accelerator, never an
  authority: only a feed that parsed and passed its expansion budget is compiled, and the file
  is read under `windows.kept_files`'s StrictModes rule (a damaged, foreign or wrongly owned one is
  ignored with one line and compiled again).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from hermes_estop.model.cronspec import validate_timezone
from hermes_estop.model.errors import EstopError, StoreError
from hermes_estop.model.text import printable
from hermes_estop.windows import kept_files
from hermes_estop.windows.ical import CHUNK, EPOCH, CalendarEvent, Feed

__all__ = ["HORIZON", "CompiledFeed", "compile_feed", "compiled_feed", "feed_key"]

log = logging.getLogger(__name__)

_FORMAT = 1
#: how far past its build a compiled feed answers without parsing (as the windows schedule)
HORIZON = kept_files.HORIZON

#: one event as compiled: start, end (epoch seconds), ident, uid, reason, all-day dates or None
_Row = list[object]


class CompiledFeed(Feed):
    """A feed whose chunks near its build are read from its compiled schedule; any other chunk,
    and the zone of a UID whose zone is not a named one, is asked of the feed parsed then."""

    def __init__(self, *, label: str, tz: ZoneInfo, digest: str, longest: timedelta,
                 spans: tuple[timedelta, ...], chunks: dict[int, list[CalendarEvent]], zones: dict[str, str | None],
                 parse: Callable[[], Feed]) -> None:
        super().__init__(label, None, tz, digest, frozenset(), longest=longest, spans=spans)
        self._compiled = chunks
        self._unnamed = frozenset(uid for uid, zone in zones.items() if zone is None)
        self._zones.update({uid: validate_timezone(zone) for uid, zone in zones.items() if zone is not None})
        self._parse = parse
        self._parsed: Feed | None = None

    def chunk(self, index: int, ahead: int = 0) -> list[CalendarEvent]:
        found = self._compiled.get(index)
        return found if found is not None else self._feed().chunk(index, ahead)

    def zone_of(self, uid: str | None) -> tzinfo:
        return self._feed().zone_of(uid) if uid in self._unnamed else super().zone_of(uid)

    def _feed(self) -> Feed:
        if self._parsed is None:
            self._parsed = self._parse()
        return self._parsed


def feed_key(content: str, settings: str) -> str:
    """What a compiled feed is of: the feed's bytes (`content`, their SHA-256, which the caller
    has already computed) and the settings (label, salt, zone) they are read with."""
    return hashlib.sha256(f"{content}\0{settings}".encode("utf-8", "surrogateescape")).hexdigest()


def _chunk_range(now: datetime, longest: timedelta) -> range:
    return range((now - longest - EPOCH) // CHUNK, (now + HORIZON - EPOCH) // CHUNK + 1)


def _zone_name(zone: tzinfo) -> str | None:
    return zone.key if isinstance(zone, ZoneInfo) else None


def compile_feed(path: Path, key: str, feed: Feed, now: datetime, *, private: bool) -> None:
    """Write the compiled schedule of `feed` (parsed from the bytes and settings of `key`) at
    `path` (`kept_files.write_trusted`, told whether `path` is in this user's `private` cache): its
    chunks around `now`. Never fails its caller (an accelerator)."""
    try:
        chunks = {index: feed.chunk(index, ahead=1) for index in _chunk_range(now, feed.longest)}
        zones = {uid: _zone_name(zone) for uid, zone in feed.zones().items()}
        named = {z for z in zones.values() if z is not None} | {feed.tz.key}
        header = {"format": _FORMAT, "key": key, "digest": feed.digest, "basis": kept_files.basis(named), "zones_used": sorted(named),
                  "lo": int(now.timestamp()), "tz": feed.tz.key, "longest": feed.longest.total_seconds(),
                  "spans": [s.total_seconds() for s in feed.spans], "zones": zones, "chunks": sorted(chunks)}
        lines = [json.dumps(header, separators=(",", ":"))]
        lines += [json.dumps([_row(e) for e in chunks[index]], separators=(",", ":")) for index in sorted(chunks)]
        kept_files.write_trusted(path, "\n".join(lines).encode("utf-8", "surrogateescape"), private=private)
    except (OSError, StoreError, EstopError, ValueError) as exc:
        log.debug("compiled feed %s not written: %s", path, exc)


def _row(event: CalendarEvent) -> _Row:
    days = [event.days[0].isoformat(), event.days[1].isoformat()] if event.days is not None else None
    return [int(event.start.timestamp()), int(event.end.timestamp()), event.ident, event.uid, event.reason, days]


def compiled_feed(path: Path, key: str, label: str, now: datetime, parse: Callable[[], Feed]) -> CompiledFeed | None:
    """The compiled feed at `path` when it is of `key`, answers at `now` (built less than half
    its horizon ago, not in the future) and passes the ownership rule; else None (a damaged one
    is named in one line). `parse` gives the feed parsed, for what the file does not hold."""
    data = kept_files.trusted_bytes(path)
    if not data:
        return None
    try:
        return _loaded(data.split(b"\n"), key, label, now, parse)
    except (KeyError, TypeError, ValueError, IndexError, RecursionError, EstopError) as exc:
        log.warning("compiled feed %s ignored and compiled again: %s", printable(str(path)), printable(str(exc)))
        return None


def _loaded(lines: list[bytes], key: str, label: str, now: datetime,
            parse: Callable[[], Feed]) -> CompiledFeed | None:
    header = json.loads(lines[0])
    if not _answers(header, key, now):
        return None
    indexes, zones, digest = header["chunks"], header["zones"], header["digest"]
    if type(indexes) is not list or not all(type(i) is int for i in indexes) or len(lines) != 1 + len(indexes):
        raise ValueError("chunks do not match their lines")
    if type(zones) is not dict or not all(type(z) is str or z is None for z in zones.values()):
        raise ValueError("zones is not a map of UIDs to zone names")
    if type(digest) is not str:
        raise ValueError("digest is not text")
    chunks = {index: _events(line) for index, line in zip(indexes, lines[1:], strict=True)}
    return CompiledFeed(label=label, tz=validate_timezone(header["tz"]), digest=digest,
                        longest=timedelta(seconds=_number(header["longest"])),
                        spans=tuple(timedelta(seconds=_number(s)) for s in header["spans"]), chunks=chunks,
                        zones=zones, parse=parse)


def _answers(header: object, key: str, now: datetime) -> bool:
    """Whether the compiled feed with this header is of `key`, built by this code with today's
    zone data, and answers at `now` (built less than half its horizon before it)."""
    if not isinstance(header, dict) or header.get("format") != _FORMAT or header.get("key") != key:
        return False
    lo, used = header["lo"], header["zones_used"]
    if type(lo) is not int or not lo <= now.timestamp() < lo + HORIZON.total_seconds() / 2:
        return False
    if type(used) is not list or not all(type(z) is str for z in used):
        raise ValueError("zones_used is not a list of zone names")
    return bool(header.get("basis") == kept_files.basis(used))


def _number(value: object) -> float:
    if type(value) not in (int, float):
        raise ValueError(f"{value!r} is not a number of seconds")
    return float(value)  # type: ignore[arg-type]


def _events(line: bytes) -> list[CalendarEvent]:
    rows = json.loads(line)
    if type(rows) is not list:
        raise ValueError("a chunk is not a list of events")
    return [_event(row) for row in rows]


def _event(row: object) -> CalendarEvent:
    if type(row) is not list or len(row) != 6:
        raise ValueError("an event is not a list of six values")
    start, end, ident, uid, reason, days = row
    if not (type(start) is int and type(end) is int and start < end and type(ident) is str and type(uid) is str
            and type(reason) is str and (days is None or (type(days) is list and len(days) == 2))):
        raise ValueError("an event of the wrong types")
    dates = (date.fromisoformat(days[0]), date.fromisoformat(days[1])) if days is not None else None
    return CalendarEvent(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC), ident, uid, reason, dates)
