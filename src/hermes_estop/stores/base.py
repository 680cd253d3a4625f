"""The store contract, in two parts, each its own small abstract base: `Holds` (the holds and the
audit trail every hold write appends to) and `FleetState` (the window ledger, service states,
the consumer registry, leadership); `HoldStore` is both. The ledger's storage (`RecordTable`, and
`JsonRecordFile`, its file in a fleet root) is here beside the contract that hands it out. One module per backend beside it; one
contract test suite (`tests/stores/test_contract.py`) parametrized over every backend.

A store keeps at most one hold per `Location` and the audit trail. It never decides who is
admitted: that is `hermes_estop.process.check`, over the readings a store returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from pathlib import Path

from hermes_estop.model.errors import HoldConflict, StoreError
from hermes_estop.model.hold import (
    EngageRequest,
    Fence,
    Hold,
    HoldState,
    Reading,
    Sentinel,
    merge_hold,
    new_generation,
    not_current,
    precondition_met,
)
from hermes_estop.model.homes import Location
from hermes_estop.model.record import Record, set_field
from hermes_estop.model.text import one_line
from hermes_estop.model.timeutil import Clock, parse_stamp, utc_now

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
    from typing import Any

    from hermes_estop.model.audit_event import AuditEntry, AuditEvent
    from hermes_estop.stores.registry import ConsumerTable
    from hermes_estop.stores.state import StateTable

__all__ = ["LEDGER", "LEDGER_FILE", "Arming", "FleetState", "FleetStateInRoot", "HoldStore", "Holds", "JsonRecordFile",
           "Judge", "RecordTable", "SaidOnce", "expiry_stamp", "fence_matches", "file_ledger", "new_hold_id",
           "not_current", "planned_engage", "refused_write", "released_reading", "scoped_detail", "scoped_target",
           "split_scoped", "unreadable_refuses", "without"]


if TYPE_CHECKING:
    #: the fleet's judgement of one write, called by a store under the location's lock (or inside
    #: its transaction) with what stands, the body the write leaves (None: nothing) and the
    #: store's trusted clock; it raises (`PolicyRefused`) to refuse, and then nothing is written
    Judge = Callable[[Reading, Sentinel | None, datetime], None]
    #: one record of a `RecordTable`
    JsonRecord = dict[str, Any]
    #: validates one stored record (key, record); raises `ValueError` naming what is wrong
    Check = Callable[[str, Any], object]


class SaidOnce:
    """Keys a warning was already given for (one line per refused retire, not one per pass),
    bounded: past `limit` keys it forgets them all and may say each once more."""

    def __init__(self, limit: int = 1024) -> None:
        self._keys: dict[object, None] = {}
        self._limit = limit

    def first(self, key: object) -> bool:
        """True the first time `key` is seen (then remembered)."""
        if key in self._keys:
            return False
        if len(self._keys) > self._limit:
            self._keys.clear()
        self._keys[key] = None
        return True


def expiry_stamp(expired: Reading, claimed: datetime, trusted: datetime) -> datetime | None:
    """The instant the `expire` line of `expired` is stamped with, or None when the store's
    trusted clock (`trusted`: the server's `now()`, or the wall clock as the monotonic clock
    confirms it) says its deadman is still ahead, so the retire is refused.

    Why: the `now` a caller passes is that process's clock, which decides only for itself
    (docs/design.md, "Which clock decides an expiry"); the line is never stamped before the
    deadline, nor later than either clock says it is."""
    hold = expired.hold
    deadline = hold.expires_at if hold is not None else None
    if deadline is None or trusted < deadline:
        return None
    return max(deadline, min(claimed, trusted))



def refused_write(location: Location, standing: Reading) -> HoldConflict:
    """The error of an engage whose `only_if` the standing hold does not meet."""
    current = standing.fence.describe() if standing.fence else "unknown"
    return HoldConflict(f"{location.describe()} is held by generation {current}, which this write may not replace",
                        standing)


def new_hold_id() -> str:
    """A scoped hold's id at its location: short enough to type in `hermes resume --hold ID`."""
    import os

    return os.urandom(4).hex()


def scoped_target(scoped: tuple[Reading, ...], request: EngageRequest) -> Reading | None:
    """The scoped hold a scoped engage re-arms: the one `request.hold_id` names, else the one
    with the same selector; None: the engage adds a new one."""
    for reading in scoped:
        hold = reading.hold
        if hold is not None and request.hold_id is not None and hold.hold_id == request.hold_id:
            return reading
    if request.hold_id is not None:
        return None
    for reading in scoped:
        if reading.hold is not None and reading.hold.selector == request.selector:
            return reading
    return None


def fence_matches(standing: Reading, fence: Fence) -> bool:
    """Whether `standing` (a full or scoped hold's reading) is the one `fence` names: by
    generation, or, for a body without one, by the identity it was read with."""
    if standing.state is HoldState.ABSENT or standing.fence is None:
        return False
    if fence.generation is not None:
        return standing.hold is not None and standing.hold.generation == fence.generation
    if fence.file_id is not None:
        return standing.hold is not None and standing.hold.generation is None and standing.fence.file_id == fence.file_id
    return False


def released_reading(standing: Reading, generation: str | None) -> Reading | None:
    """What `release(generation)` removes from `standing`: a plain release the full hold (never
    the scoped ones), a fenced one the full or scoped hold carrying `generation`."""
    if generation is None:
        return standing if standing.state is not HoldState.ABSENT else None
    if standing.hold is not None and standing.hold.generation == generation:
        return standing
    return next((s for s in standing.scoped if s.hold is not None and s.hold.generation == generation), None)


def without(standing: Reading, removed: Reading) -> Sentinel:
    """Every hold of `standing`'s body but `removed` (nothing of an unreadable body)."""
    if removed is standing:
        return Sentinel(None, tuple(s.hold for s in standing.scoped if s.hold is not None))
    full = standing.hold if standing.state is not HoldState.ABSENT else None
    return Sentinel(full, tuple(s.hold for s in standing.scoped if s is not removed and s.hold is not None))


def split_scoped(standing: Reading, leaving: Reading | None) -> tuple[tuple[Hold, ...], tuple[Reading, ...]]:
    """The scoped holds a rewrite of `standing`'s body keeps (every active one but `leaving`),
    and the expired ones it drops: the rewrite is what retires them, so their lift is recorded."""
    kept: list[Hold] = []
    expired: list[Reading] = []
    for scoped in standing.scoped:
        if scoped is leaving or scoped.hold is None:
            continue
        if scoped.state is HoldState.EXPIRED:
            expired.append(scoped)
        else:
            kept.append(scoped.hold)
    return tuple(kept), tuple(expired)


def scoped_detail(hold: Hold | None) -> str | None:
    """The audit `detail` naming a scoped hold and its selector (None for the full hold), in a
    form `selector.selector_of_detail` reads back (the coverage audit needs what a lifted hold
    covered): `scoped hold <id> only {"components": [...], "jobs": [...]}`."""
    if hold is None or hold.selector is None:
        return None
    import json

    return f"scoped hold {hold.hold_id} only {json.dumps(hold.selector.to_body(), sort_keys=True)}"


def unreadable_refuses(location: Location) -> HoldConflict:
    """A scoped hold is never written over an unreadable body: the rewrite would drop the hold of
    everything the unreadable body is."""
    return HoldConflict(f"the hold at {location.describe()} is unreadable and holds everything; resume or re-pause "
                        "it before adding a scoped hold")


class Arming(Record):
    """What one engage writes at a location, decided from the body standing there: the new
    `hold`, the whole body (`sentinel`), the audit `event` ("engage" or "rearm"), and the expired
    holds the rewrite drops (`lifted`, in the order their `expire` lines are written)."""

    __slots__ = ("hold", "sentinel", "event", "lifted")  # noqa: RUF023 (constructor order)
    hold: Hold
    sentinel: Sentinel
    event: str
    lifted: tuple[Reading, ...]

    def __init__(self, hold: Hold, sentinel: Sentinel, event: str, lifted: tuple[Reading, ...]) -> None:
        set_field(self, "hold", hold)
        set_field(self, "sentinel", sentinel)
        set_field(self, "event", event)
        set_field(self, "lifted", lifted)


def planned_engage(location: Location, standing: Reading, request: EngageRequest, now: datetime) -> Arming:
    """The write of an engage over `standing` (read under the location's lock), the one decision
    both stores take: a full engage re-arms or replaces the full hold and keeps the scoped ones; a
    scoped engage re-arms or adds its scoped hold and keeps the rest. Raises `HoldConflict` where
    `request.only_if` is not met, or a scoped hold would be written over an unreadable body."""
    if request.selector is None:
        return _full_engage(location, standing, request, now)
    if standing.state is HoldState.UNREADABLE:
        raise unreadable_refuses(location)
    return _scoped_engage(location, standing, request, now)


def _full_engage(location: Location, standing: Reading, request: EngageRequest, now: datetime) -> Arming:
    if not precondition_met(request.only_if, standing):
        raise refused_write(location, standing)
    hold = merge_hold(standing.hold if standing.active else None, request, now, new_generation())
    others, gone = split_scoped(standing, None)
    return Arming(hold, Sentinel(hold, others), "rearm" if standing.active else "engage",
                  (*_expired(standing), *gone))


def _scoped_engage(location: Location, standing: Reading, request: EngageRequest, now: datetime) -> Arming:
    target = scoped_target(standing.scoped, request)
    if not precondition_met(request.only_if, target):
        raise refused_write(location, target if target is not None else standing)
    rearmed = target.hold if target is not None else None
    hold_id = (rearmed.hold_id if rearmed is not None else None) or request.hold_id or new_hold_id()
    base = rearmed if target is not None and target.active else None
    hold = merge_hold(base, request, now, new_generation()).scoped_as(request.selector, hold_id)
    others, gone = split_scoped(standing, target)
    full = standing.hold if standing.state is HoldState.ACTIVE else None
    event = "rearm" if target is not None and target.active else "engage"
    return Arming(hold, Sentinel(full, (*others, hold)), event, (*_expired(target), *_expired(standing), *gone))


def _expired(reading: Reading | None) -> tuple[Reading, ...]:
    return (reading,) if reading is not None and reading.state is HoldState.EXPIRED else ()


class Holds(ABC):
    """The holds part of the store contract: where holds live, and the audit trail every hold
    write appends to. Every method that writes is atomic with respect to every other writer of
    the same location, on every host that shares the store. A third backend implements the
    eight abstract methods (four for holds, four for the trail); every hook has a default."""

    #: short backend name shown by `hermes store status`
    name: str = "abstract"
    #: test seam: called with a step name at the points where another writer may interleave
    interleave: Callable[[str], None] | None = None
    #: the fleet root this store serves, where it has one (the file store's files live there)
    root: Path | None = None
    #: audit appends this store could not make (the hold was written all the same), and the last why
    audit_failures: int = 0
    last_audit_failure: str | None = None

    def step(self, name: str) -> None:
        if self.interleave is not None:
            self.interleave(name)

    def note_audit_failure(self, problem: str) -> None:
        """Remember an audit append that failed after (or while) its hold was written: a stop
        never waits on its log, but the failure must be seen (`hermes pause` stderr, status,
        the metric `hermes_estop_audit_failures_total`)."""
        self.audit_failures += 1
        self.last_audit_failure = problem

    def audit_problem(self) -> str | None:
        """Why the audit trail cannot be appended to right now (None: nothing known against it),
        for `hermes status` and the metrics. Never raises; the file store checks its file."""
        return None

    def default_clock(self) -> Clock:
        """The clock deadlines are judged by. The file store uses this host's; a shared store
        uses its server's, so hosts with skewed clocks agree on when a hold lifts."""
        return utc_now

    @abstractmethod
    def read(self, locations: Sequence[Location], now: datetime) -> tuple[Reading, ...]:
        """One `Reading` per location, in the order given, all from one pass.

        Never raises: a location that cannot be read is an UNREADABLE reading, which is active
        (fail safe). Takes no lock and never removes anything: an expired hold reads EXPIRED
        and stays until the daemon's deadman or an operator's command retires it."""

    @abstractmethod
    def engage(self, location: Location, request: EngageRequest, now: datetime, actor: str,
               judge: Judge | None = None) -> Hold:
        """Arm or re-arm the hold at `location` in one read-decide-write step.

        `judge` (every write takes one, docs/design.md "A write is judged by what it does") is
        called inside that step, after the body to write is decided and before it is written;
        what it raises propagates and nothing is written.

        Mints a new generation; keeps from the standing hold what `request` leaves as None
        (`hold.merge_hold`). Raises `HoldConflict` (nothing written) when `request.only_if` is not
        met, `StoreError` when the write fails; on any error the standing hold is untouched.
        Appends an `engage` or `rearm` audit event."""

    @abstractmethod
    def retire(self, location: Location, fence: Fence, now: datetime, actor: str, event: str = "retire",
               judge: Judge | None = None, detail: str | None = None) -> bool:
        """Remove the hold at `location` only if it still matches `fence` at the moment of the
        check; a successor written at any point before that check survives. True when removed
        (and an audit event `event` appended); False when it was gone or a successor stands.
        With `event="expire"` the deadline is checked against the store's trusted clock, not
        `now` (`expiry_stamp`): False, nothing removed, while that clock says it is ahead.
        `judge` as for `engage`; `detail` is written on the audit line (why it was retired)."""

    @abstractmethod
    def release(self, location: Location, generation: str | None, now: datetime, actor: str,
                judge: Judge | None = None) -> Reading | None:
        """The operator's resume: remove whatever hold is at `location` (also an unreadable one)
        and return the reading removed, or None when nothing was there. With `generation`,
        remove only that generation, else raise `HoldConflict` and remove nothing. `judge` as
        for `engage`."""

    @abstractmethod
    def append_audit(self, event: AuditEvent) -> None:
        """Append one event to the audit trail."""

    @abstractmethod
    def history(self, limit: int | None = None) -> list[AuditEvent]:
        """Audit events, oldest first; with `limit`, only the newest `limit`."""

    @abstractmethod
    def audit_after(self, position: int, limit: int) -> list[AuditEntry]:
        """At most `limit` audit entries after cursor `position` (0: from the start), oldest
        first. A position only grows along the trail. Raises `OSError`/`StoreError` when the
        trail cannot be read."""

    @abstractmethod
    def audit_head(self) -> int:
        """The cursor position just past the newest audit entry."""

    def history_counted(self, limit: int | None = None, since: datetime | None = None) -> tuple[list[AuditEvent], int]:
        """`history(limit)` (with `since`, only the events at or after it) and how many stored
        entries were corrupt and skipped (a hand-edited audit file), so an operator is told
        rather than shown a silently shorter trail."""
        if since is None:
            return self.history(limit), 0
        events = [event for event in self.history() if event.time >= since]
        return (events[-limit:] if limit else events), 0

    def settle(self, timeout: float = 2.0) -> bool:
        """Wait until what this process wrote is what it reads (a shared store's listener has
        caught up); False when `timeout` ran out first. For tests and an orderly shutdown."""
        return True

    def where(self, location: Location) -> str:
        """Where the hold of `location` is kept, for an operator to read (a path, a table row)."""
        return location.describe()

    def reachable(self) -> bool | None:
        """Whether the store as a whole answers, from what this process already knows (never a
        round trip: a metrics scrape asks); None when the store has no such notion (the file
        store: each file is judged where it is read)."""
        return None

    def scopes(self, root: Path) -> list[str]:
        """The profile scopes of fleet root `root` that can hold, by name: every profile home
        under `root/profiles` (the file store keeps their sentinels there); a shared store adds
        every profile scope it has a hold for, wherever that profile's home lives."""
        from hermes_estop.model.homes import profile_names

        return profile_names(root)

    def describe(self) -> dict[str, Any]:
        """What `hermes store status` prints."""
        return {"backend": self.name}

    def init_schema(self) -> tuple[int, list[int]]:
        """`hermes store init`: create or upgrade what the store keeps, safe to run again and
        from several hosts at once; (schema version, versions applied by this call). A store
        with nothing to create (the sentinel files) returns (0, [])."""
        return 0, []

    def schema_info(self) -> dict[str, Any]:
        """Where the store's schema lives, for `hermes store init` to report."""
        return self.describe()

    def close(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""


# -- keyed records: the window ledger's storage ---------------------------------------------------
#
# Small keyed records that a service of the fleet keeps where the fleet's holds are kept (the
# window scheduler's ledger of occurrences): the contract (`RecordTable`) and its file in the
# fleet root (`JsonRecordFile`, what `FleetStateInRoot.open_ledger` hands out); the PostgreSQL one
# is `pg_records.PgRecordTable`. The ledger must be shared by every scheduler of a fleet, so it
# lives in the fleet's store, and the core may not import the services above it: a store hands
# out the STORAGE and the service keeps its typed layer over it (`windows.ledger`). A record is a
# flat JSON object (text, null, instants as ISO-8601 text), keyed by text; one of its fields
# (`expiry`) is an instant by which old records are pruned.

#: the window scheduler's ledger: what its records are (for messages), and its file
LEDGER = "the window ledger"
LEDGER_FILE = "windows-state.json"
_FORMAT = 1


class RecordTable(ABC):
    """Keyed records, shared by every process that opens the same table (only a leader writes).
    `load` and `update` are atomic with respect to each other across processes and hosts:
    `load` never sees half of an `update`."""

    #: short backend name for logs and `hermes serve --dry-run`
    name: str = "abstract"

    def __init__(self, what: str, expiry: str) -> None:
        #: what the records are, for messages ("the window ledger")
        self.what = what
        #: the field holding the instant by which a record is pruned (`update(prune_before=)`)
        self.expiry = expiry

    @abstractmethod
    def load(self) -> dict[str, JsonRecord]:
        """Every record, by key; an absent table is empty. Raises `StoreError` naming the table
        when it exists but cannot be read (the caller then takes no decision)."""

    @abstractmethod
    def update(self, upserts: Mapping[str, JsonRecord], *, remove: Iterable[str] = (),
               prune_before: datetime | None = None, check: Check | None = None) -> None:
        """Delete the records keyed `remove`, upsert `upserts` (by key), then delete those whose
        `expiry` instant is before `prune_before`, all or nothing; records not named are left
        as they are (another writer's survive). `check` validates the stored records first
        where the medium can hold records this program did not write (a hand-edited file);
        typed columns need no check.

        Raises `StoreError` on failure (one made by `unreadable` when `check` refuses a record);
        the table is then unchanged."""

    def version(self) -> Hashable | None:
        """A token that changes whenever the records may have changed, so a reader can skip
        parsing them again; None when the table cannot tell cheaply (load every time). Raises
        `StoreError` when it cannot be determined."""
        return None

    def describe(self) -> str:
        return self.name

    def unreadable(self, problem: object) -> StoreError:
        """The error for records this program cannot read."""
        return StoreError(f"{self.what} {self.describe()} is unreadable: {problem} (fix or remove it)")

    def close(self) -> None:
        """Release connections; the table is unusable afterwards."""


class JsonRecordFile(RecordTable):
    """Records as one JSON file, `{"format": 1, "<collection>": {"<key>": {record}, ...}}` (keys
    sorted, written compactly), replaced atomically under an exclusive lock on `.<name>.lock`
    beside it (`fsutil.locked_update`); readers take no lock."""

    name = "file"

    def __init__(self, path: Path, *, what: str, collection: str, expiry: str) -> None:
        super().__init__(what, expiry)
        self.path = Path(path)
        self.collection = collection

    def describe(self) -> str:
        return str(self.path)

    def version(self) -> Hashable | None:
        import os

        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return ("absent",)
        except OSError as exc:
            raise StoreError(f"cannot stat {self.what} {self.path}: {one_line(exc.strerror or exc)}") from None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def load(self) -> dict[str, JsonRecord]:
        from hermes_estop.system.fsutil import read_optional

        return self._parse(read_optional(self.path, what=self.what))

    def _parse(self, raw: bytes | None) -> dict[str, JsonRecord]:
        if raw is None:
            return {}
        import json

        try:
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get(self.collection), dict):
                raise ValueError(f"expected {{\"format\": 1, \"{self.collection}\": {{...}}}}")  # noqa: TRY004
            if data.get("format") != _FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            records: dict[str, JsonRecord] = data[self.collection]
            return records
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise self.unreadable(exc) from None

    def _render(self, records: Mapping[str, JsonRecord]) -> bytes:
        """The file written compactly, by `json`'s C encoder (an `indent` makes `json` use its
        pure-Python encoder, and the window ledger of a week of 10,000 windows is rewritten on
        every busy pass)."""
        import json

        body = {"format": _FORMAT, self.collection: {key: records[key] for key in sorted(records)}}
        return (json.dumps(body, separators=(",", ":")) + "\n").encode("utf-8")

    def update(self, upserts: Mapping[str, JsonRecord], *, remove: Iterable[str] = (),
               prune_before: datetime | None = None, check: Check | None = None) -> None:
        from hermes_estop.system.fsutil import locked_update

        remove = list(remove)
        if not upserts and not remove and prune_before is None:
            return
        with locked_update(self.path, what=self.what) as file:
            records = self._parse(file.current)
            if check is not None:
                try:
                    for key, record in records.items():
                        check(key, record)
                except ValueError as exc:
                    raise self.unreadable(exc) from None
            for key in remove:
                records.pop(key, None)
            records.update(upserts)
            if prune_before is not None:
                records = {key: record for key, record in records.items() if not self._expired(record, prune_before)}
            file.replace(self._render(records))

    def _expired(self, record: JsonRecord, before: datetime) -> bool:
        """Ended before `before`; a record with no readable expiry is kept (never pruned blind)."""
        expiry = parse_stamp(record.get(self.expiry)) if isinstance(record, dict) else None
        return expiry is not None and expiry < before


def file_ledger(root: Path, filename: str = LEDGER_FILE) -> JsonRecordFile:
    """The window scheduler's ledger of the fleet rooted at `root`, as a file there."""
    return JsonRecordFile(Path(root) / filename, what=LEDGER, collection="occurrences", expiry="end")


class FleetState(ABC):
    """The fleet-state part of the store contract: what the fleet's services share, kept where
    the store keeps the fleet's state so that every host of the fleet sees the same: the window
    scheduler's ledger, named service states, the consumer registry, and leadership. Four
    abstract methods; `FleetStateInRoot` keeps them as files in a fleet root."""

    @abstractmethod
    def open_ledger(self, root: Path | None = None) -> RecordTable:
        """The storage of the window scheduler's ledger of fleet root `root` (default: this
        store's root), shared by every scheduler of the fleet (PostgreSQL: its `occurrences`
        table). The typed layer over it is `windows.ledger.OccurrenceLedger` (the core never
        imports windows). Raises `StoreError` when there is nowhere to keep it."""

    @abstractmethod
    def open_state(self, service: str, root: Path | None = None) -> StateTable:
        """The named states of fleet-wide service `service` (the notifier's cursors)."""

    @abstractmethod
    def open_consumers(self, root: Path | None = None) -> ConsumerTable:
        """The consumer registry of the fleet (one entry per process that starts work)."""

    @abstractmethod
    def leader_gate(self, role: str, poll: float | None = None) -> Callable[[], bool] | None:
        """This process's `is_leader` in an election for `role` among every process sharing
        this store (one active window scheduler per fleet), or None where there is nothing to
        elect: every process may act, and fenced writes keep them from doing anything twice."""


class FleetStateInRoot(FleetState):
    """The fleet's state as files in the fleet root (the sentinel-file store's, and the default
    of a store that has no shared place of its own): nothing to elect."""

    name: str
    root: Path | None

    def open_ledger(self, root: Path | None = None) -> RecordTable:
        """Here `windows-state.json` in the fleet root."""
        return file_ledger(self._root_for(root, "window ledger"))

    def open_state(self, service: str, root: Path | None = None) -> StateTable:
        """Here `<root>/<service>-state.json`."""
        from hermes_estop.stores.state import JsonStateFile

        return JsonStateFile(self._root_for(root, "state"), service)

    def open_consumers(self, root: Path | None = None) -> ConsumerTable:
        """Here one file per process under `<root>/consumers/`."""
        from hermes_estop.stores.registry import ConsumerFiles

        return ConsumerFiles(self._root_for(root, "consumer registry"))

    def _root_for(self, root: Path | None, what: str) -> Path:
        from hermes_estop.model.errors import StoreError

        where = root if root is not None else self.root
        if where is None:
            raise StoreError(f"the {self.name} store has no fleet root to keep the {what} in")
        return where

    def leader_gate(self, role: str, poll: float | None = None) -> Callable[[], bool] | None:
        return None


class HoldStore(Holds, FleetState):
    """A whole store: both parts of the contract (`Holds`, `FleetState`). What `Fleet` and
    `Estop` are built over."""
