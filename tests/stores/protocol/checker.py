"""A systematic check of the file store's hold protocol (issue 22; docs/design.md §5).

The real `FileStore` code runs in one greenlet per actor (each actor is a process: its own store
object), over the in-memory filesystem of `model_os`, which makes every observable OS call a
scheduling point. Greenlets, not threads: only one actor ever runs at a time, and a switch between
greenlets costs about a microsecond where a handoff between threads costs two OS wake-ups (tens to
hundreds of microseconds on a loaded machine, in each of the half a million steps of the suite).
`explore` runs every schedule of the actors up to a bound on preemptions plus crashes (a kill of
one actor, or a power loss that keeps only what was fsync'ed, injected before any step), by
stateless re-execution: each execution follows a prefix of choices, then the
default (keep running the current actor). After every step the invariants are checked:

1. a reader never answers free while, all through its read, a hold whose deadman had not passed
   for that reader was on disk;
2. a fenced retire (an expiry, a window's retire) never removes a generation other than the one
   it names (so 6: a window's retire never removes an operator's re-arm);
3. during a re-arm the sentinel is never absent (no removal happened) and a sentinel on disk,
   visible or durable, is always a complete body;
4. every generation on disk is in the audit trail: the visible sentinel in the visible trail (what
   a kill keeps), the durable sentinel in the durable trail (what a power loss keeps);
5. no lock is held by a dead actor, no live actor waits forever, and after every execution a
   fresh writer can still arm;
6. an acknowledged write (engage, re-arm: the call returned) stands until a removal line names
   its generation: a generation leaves the disk only replaced by a write, or removed by an actor
   that then names it (one killed between its removal and its line is excused; after a power
   loss, which keeps no unsynced line, invariant 8 decides);
7. every removal line (release, retire, expire) a completed actor wrote names a generation that
   actor removed;
8. an acknowledged arm survives a power loss: when the last acknowledged generation stands, the
   durable sentinel carries it (also in scenarios that start without a hold: the directory fsync
   of a first arm);
9. a judged lift removes only the generation it judged (issue 43: the judgement and the write
   are one step under the lock, so a re-arm landing after the judgement is never lifted by it).

A violation comes back with the numbered schedule that produced it; `replay` runs that schedule
again, deterministically.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from greenlet import greenlet
from model_os import ActorKilled, Hooks, ModelFcntl, ModelFS, ModelOS, ModelTime

from hermes_estop.model.hold import EngageRequest, Fence, HoldState, parse_body
from hermes_estop.model.homes import Layout, Location
from hermes_estop.stores import audit_log as audit_module, file as file_module
from hermes_estop.stores.audit_log import AUDIT_FILE
from hermes_estop.stores.file import FileStore
from hermes_estop.system import fsread, fsutil

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ENGAGES = ("engage", "rearm")

Choice = tuple[Any, ...]  # ("run", i) | ("kill", i) | ("power",)


@contextmanager
def model_installed(model: ModelOS) -> Iterator[None]:
    """Bind the OS layer of the file store's modules to `model` (production: the real modules).
    The audit trail's rotation is off: it is no part of the hold protocol (its own test is
    tests/notify/test_notify_rotation.py), and an append without it takes no rotation lock."""
    bound = [(audit_module, "audit_rotation", lambda root: (0, 1)),
             (file_module, "os", model), (fsutil, "os", model), (fsread, "os", model), (audit_module, "os", model),
             (fsutil, "fcntl", ModelFcntl(model)), (fsutil, "time", ModelTime(model.hooks.wait_lock))]
    saved = [(module, name, getattr(module, name)) for module, name, _ in bound]
    for module, name, value in bound:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


# -- the actors ------------------------------------------------------------------------------


@dataclass
class Ctx:
    """What an actor's work gets: its store, the location, its clock reading, the standing
    generation at the start (the one a fenced retire names), and a place for its reads."""

    store: FileStore
    location: Location
    now: datetime
    initial: str | None
    actor: Actor


def rearm(ctx: Ctx) -> Any:
    hold = ctx.store.engage(ctx.location, EngageRequest(reason="operator", expires_at=ctx.now + timedelta(hours=2)),
                            ctx.now, "operator")
    ctx.actor.acknowledge(hold.generation)
    return hold


def release(ctx: Ctx) -> Any:
    return ctx.store.release(ctx.location, None, ctx.now, "operator")


def judged_release(ctx: Ctx) -> Any:
    """An operator's lift as `Fleet.release` makes it: the store calls the fleet's judgement with
    what stands; the generation it judged is what the lift may remove (invariant 9)."""
    def judge(before: Any, after: Any, trusted: Any) -> None:
        ctx.actor.fence = before.hold.generation if before.hold is not None else None
        ctx.actor.judged = True

    return ctx.store.release(ctx.location, None, ctx.now, "operator", judge=judge)


def fenced_retire(ctx: Ctx) -> Any:
    ctx.actor.fence = ctx.initial
    return ctx.store.retire(ctx.location, Fence(ctx.initial), ctx.now, "retirer")


def plain_read(ctx: Ctx) -> Any:
    return ctx.actor.read(ctx.store, ctx.location, ctx.now)


def deadman_read(ctx: Ctx) -> Any:
    """The daemon's deadman after the initial hold's deadman: reads, and retires what it found
    expired, fenced on the generation it read (`Fleet.retire_expired`; a reader never retires)."""
    reading = ctx.actor.read(ctx.store, ctx.location, ctx.now)
    if reading.state is HoldState.EXPIRED:
        ctx.actor.fence = reading.fence.generation if reading.fence else None
        return ctx.store.retire(ctx.location, reading.fence or Fence(), ctx.now, "deadman", "expire")
    return None


def window(ctx: Ctx) -> Any:
    """A window's arm of its own hold over a free location, then its fenced retire at the end."""
    hold = ctx.store.engage(ctx.location, EngageRequest(reason="window", expires_at=ctx.now + timedelta(hours=1)),
                            ctx.now, "window")
    ctx.actor.acknowledge(hold.generation)
    ctx.actor.fence = hold.generation
    return ctx.store.retire(ctx.location, Fence(hold.generation), ctx.now, "window")


#: the removals fenced on one generation: invariant 2 holds them to it
FENCED = {fenced_retire, deadman_read, window}
#: the actors whose work may remove the sentinel (invariant 3: nobody else may make it absent)
REMOVERS = FENCED | {release, judged_release}
#: the audit events that record a removal (invariants 6 and 7)
REMOVALS = ("release", "retire", "expire")


@dataclass
class ActorSpec:
    name: str
    work: Callable[[Ctx], Any]
    offset: timedelta = timedelta(0)  # its clock reading: T0 + offset


@dataclass
class Scenario:
    name: str
    actors: list[ActorSpec]
    initial_ttl: timedelta | None = timedelta(minutes=10)  # None: no hold stands at the start
    home: str | None = None  # a profile home under the root: its sentinel and the trail in two directories


class Actor:
    def __init__(self, index: int, spec: ActorSpec) -> None:
        self.index = index
        self.spec = spec
        self.name = spec.name
        self.glet: greenlet | None = None  # its process: started at its first step
        self.pending: str | None = "start"
        self.done = False
        self.killed = False
        self.error: BaseException | None = None
        self.outcome: Any = None
        self.failed_lock: int | None = None
        self.blocked_on: int | None = None
        self.fence: str | None = None
        self.judged = False  # a judged lift's judgement ran (invariant 9)
        self.execution: Execution | None = None
        self.removed: set[str] = set()  # generations this actor unlinked or renamed over
        self.lines: list[tuple[str, str | None]] = []  # (event, generation) of the removal lines it wrote

    def acknowledge(self, generation: str | None) -> None:
        """This actor's write of `generation` returned: from now on it must stand (invariant 6)."""
        if generation is not None and self.execution is not None:
            self.execution.acknowledged.append(generation)

    def read(self, store: FileStore, location: Location, now: datetime) -> Any:
        exe = self.execution
        assert exe is not None
        start = exe.steps
        (reading,) = store.read((location,), now)
        exe.check_read(self, start, reading, now)
        return reading


# -- one execution ---------------------------------------------------------------------------


@dataclass
class Step:
    choices: list[Choice]
    taken: Choice
    default: Choice
    cost: int  # what `taken` added to the bound (a preemption, a crash)
    what: str


@dataclass
class Violation:
    invariant: int
    message: str
    schedule: list[Step] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"invariant {self.invariant} violated: {self.message}", "schedule (replay with these choices):"]
        for number, step in enumerate(self.schedule, 1):
            lines.append(f"  {number:3d}. {step.taken}  {step.what}")
        return "\n".join(lines)


class Execution(Hooks):
    """One run of a scenario under one schedule (`prefix`, then defaults)."""

    def __init__(self, scenario: Scenario, root: Path, prefix: Sequence[Choice], store_factory: Callable[[Path], FileStore],
                 crashes: int = 1, start: dict[str, Any] | None = None) -> None:
        self.scenario = scenario
        self.start = start if start is not None else {}
        self.root = root
        self.prefix = list(prefix)
        self.store_factory = store_factory
        self.crash_budget = crashes
        home = root / scenario.home if scenario.home is not None else root
        home.mkdir(parents=True, exist_ok=True)
        self.fs = ModelFS({str(root), str(home)})
        self.model = ModelOS(self.fs, self)
        self.layout = Layout(home=home, root=root)
        self.location = self.layout.own
        self.sentinel = str(self.location.sentinel)
        self.audit_path = str(root / AUDIT_FILE)
        self.actors: list[Actor] = []
        self.trace: list[Step] = []
        self.steps = 0
        self.current: Actor | None = None  # the actor running now; None: the scheduler (unscheduled)
        self.violation: Violation | None = None
        self.removed = False
        self.initial: str | None = None
        self.acknowledged: list[str] = []  # generations whose write returned, in order (invariants 6, 8)
        self.removed_by: dict[str, Actor] = {}  # generation -> the actor that unlinked it
        self.superseded: set[str] = set()  # generations a write renamed another body over
        self.lines_seen = 0
        self.runner: Actor | None = None  # the actor that took the last step
        self.powered_off = False

    # -- hooks the model calls -----------------------------------------------------------------

    def owner(self) -> Actor | None:
        return self.current

    def alive(self) -> None:
        actor = self.owner()
        if actor is not None and actor.killed:
            raise ActorKilled()

    def point(self, description: str) -> None:
        actor = self.owner()
        if actor is None:
            return
        if actor.killed:
            raise ActorKilled()
        actor.pending = description
        assert actor.glet is not None and actor.glet.parent is not None
        actor.glet.parent.switch()  # back to the scheduler, until it runs this actor again
        if actor.killed:
            raise ActorKilled()

    def wait_lock(self) -> None:
        actor = self.owner()
        if actor is None:
            raise AssertionError("a lock is busy with no actor left to free it")
        actor.blocked_on = actor.failed_lock
        self.point("wait for the lock")
        actor.blocked_on = None

    def observe(self, operation: str, path: str, detail: Any) -> None:
        actor = self.owner()
        if operation == "flock-busy" and actor is not None:
            actor.failed_lock = detail
        elif operation in ("unlink", "rename") and path == self.sentinel and detail is not None:
            gone = _generation(bytes(detail.data))
            if gone is not None:
                if operation == "rename":
                    self.superseded.add(gone)
                if actor is not None:
                    actor.removed.add(gone)
                    if operation == "unlink":
                        self.removed_by[gone] = actor
            if operation == "unlink" and actor is not None and actor.spec.work in REMOVERS:
                self.removed = True
            if actor is not None and actor.spec.work is judged_release and operation == "unlink":
                removed = _generation(bytes(detail.data))
                if not actor.judged or removed != actor.fence:
                    self.fail(9, f"{actor.name}'s lift judged generation {actor.fence} and removed generation {removed}")
            if actor is not None and actor.spec.work in FENCED and operation == "unlink":
                removed = _generation(bytes(detail.data))
                if removed != actor.fence:
                    self.fail(2, f"{actor.name}'s retire fenced on generation {actor.fence} removed generation {removed}")

    # -- invariants ----------------------------------------------------------------------------

    def fail(self, invariant: int, message: str) -> None:
        if self.violation is None:
            self.violation = Violation(invariant, message)

    def _audited(self, durable: bool) -> frozenset[str]:
        data = (self.fs.durable_data(self.audit_path) if durable else self.fs.visible_data(self.audit_path)) or b""
        return _armed(data)

    def held_at(self, index: int, now: datetime) -> bool:
        body = self.states[index]
        if body is None:
            return False
        hold, problem = _parsed(body)
        if hold is None:
            return True  # unreadable: held
        return hold.expires_at is None or now < hold.expires_at

    def check_read(self, actor: Actor, start: int, reading: Any, now: datetime) -> None:
        """Invariant 1: answering free is wrong only when a live hold stood all through the read."""
        if reading.active:
            return
        end = self.steps
        if all(self.held_at(i, now) for i in range(start, min(end, len(self.states) - 1) + 1)):
            self.fail(1, f"{actor.name} read {reading.state.value} at {now.isoformat()} while a live hold stood "
                         f"all through its read (states {start}..{end})")

    def check_state(self) -> None:
        visible = self.fs.visible_data(self.sentinel)
        durable_inode = self.fs.durable.get(self.sentinel)
        durable = durable_inode.synced if durable_inode is not None else None
        self.states.append(visible)
        # a kill keeps what is visible, a power loss what is durable: each view must hold on its own
        for where, body in (("visible", visible), ("durable", durable)):
            if body is None:
                continue
            hold, problem = _parsed(body)
            if hold is None:
                self.fail(3, f"the {where} sentinel is not a complete body ({problem}): {body[:60]!r}")
                continue
            if hold.generation is not None and hold.generation not in self._audited(where == "durable"):
                self.fail(4, f"generation {hold.generation} is on disk ({where}) but not in the {where} audit trail")
        if visible is None and self.initial is not None and not self.removed:
            self.fail(3, "the sentinel is absent although no actor removed it")
        for handle in self.fs.locks.values():
            if isinstance(handle.owner, Actor) and handle.owner.killed:
                self.fail(5, f"the lock {handle.path} is held by {handle.owner.name}, which is dead")
        named = self._attribute_lines()
        if not self.powered_off:
            self._check_acknowledged_stand(visible, named)
        self._check_removal_lines()

    def _attribute_lines(self) -> set[str]:
        """The generations the visible trail's removal lines name; each new line is the work of
        the actor that took the last step (one step appends at most one line)."""
        data = self.fs.visible_data(self.audit_path) or b""
        named = set()
        for number, event in _events(data):
            if event.get("event") not in REMOVALS:
                continue
            named.add(event.get("generation"))
            if number >= self.lines_seen and self.runner is not None:
                self.runner.lines.append((event["event"], event.get("generation")))
        self.lines_seen = len(data.splitlines())
        return named

    def _check_acknowledged_stand(self, visible: bytes | None, named: set[str]) -> None:
        """Invariant 6."""
        standing = _generation(visible) if visible is not None else None
        for generation in self.acknowledged:
            if generation == standing or generation in self.superseded or generation in named:
                continue
            remover = self.removed_by.get(generation)
            if remover is not None and (not remover.done or remover.killed):
                continue  # its removal line is still to come, or died with its remover
            by = f"removed by {remover.name}" if remover is not None else "gone"
            self.fail(6, f"acknowledged generation {generation} no longer stands ({by}) and no removal line names it")
            return

    def _check_removal_lines(self) -> None:
        """Invariant 7."""
        for actor in self.actors:
            if not actor.done or actor.killed:
                continue
            for event, generation in actor.lines:
                if generation not in actor.removed:
                    self.fail(7, f"{actor.name} wrote `{event} {generation}` but removed "
                                 f"{sorted(actor.removed) or 'nothing'}")
                    return

    def _check_power_loss(self, last: str | None, standing: str | None) -> None:
        """Invariant 8, right after a power loss: `last` was the last acknowledged generation
        and `standing` the visible one just before."""
        if last is None or standing != last:
            return
        durable = self.fs.visible_data(self.sentinel)
        kept = _generation(durable) if durable is not None else None
        if kept != last:
            what = "no sentinel" if durable is None else f"generation {kept}"
            self.fail(8, f"acknowledged generation {last} stood before a power loss; after it, {what}")

    # -- running -------------------------------------------------------------------------------

    def _body(self, actor: Actor) -> None:
        try:
            if actor.killed:
                raise ActorKilled()
            store = self.store_factory(self.root)
            ctx = Ctx(store, self.location, T0 + actor.spec.offset, self.initial, actor)
            actor.outcome = actor.spec.work(ctx)
        except ActorKilled:
            pass
        except BaseException as exc:
            actor.error = exc
        finally:
            actor.done = True
            actor.pending = None

    def enabled(self, actor: Actor) -> bool:
        return not actor.done and (actor.blocked_on is None or actor.blocked_on not in self.fs.locks)

    def run(self) -> Execution:
        with model_installed(self.model):
            if self.scenario.initial_ttl is not None:
                self.initial = self._initial_hold()
                self.acknowledged.append(self.initial)
            self.states: list[bytes | None] = []
            self.check_state()
            self.actors = [Actor(i, spec) for i, spec in enumerate(self.scenario.actors)]
            for actor in self.actors:
                actor.execution = self
                actor.glet = greenlet(functools.partial(self._body, actor))
            try:
                self._schedule()
            finally:
                for actor in self.actors:  # stop whatever still runs (a violation ended the run)
                    if not actor.done:
                        actor.killed = True
                        self._resume(actor)
            if self.violation is None:
                self._finish()
        if self.violation is not None:
            self.violation.schedule = self.trace
        return self

    def _initial_hold(self) -> str:
        """The hold standing at the start, armed by the real protocol (a variant only changes the
        actors) before any actor runs: the same in every execution of one exploration, so armed
        once and its filesystem copied into each execution (`start`: the model filesystem right
        after the arm, and its generation)."""
        if not self.start:
            hold = FileStore(self.root).engage(
                self.location, EngageRequest(reason="initial", expires_at=T0 + self.scenario.initial_ttl), T0, "setup")
            assert hold.generation is not None
            state = ModelFS(set())
            state.restore(self.fs)
            self.start.update(fs=state, generation=hold.generation)
        else:
            self.fs.restore(self.start["fs"])
        generation: str = self.start["generation"]
        return generation

    def _schedule(self) -> None:
        last: Actor | None = None
        while self.violation is None:
            alive = [a for a in self.actors if not a.done]
            if not alive:
                return
            enabled = [a for a in alive if self.enabled(a)]
            if not enabled:
                self.fail(5, "every live actor waits for a lock nobody will free: "
                             + ", ".join(f"{a.name} ({a.pending})" for a in alive))
                return
            choices: list[Choice] = [("run", a.index) for a in enabled]
            if self.crash_budget > 0:
                choices += [("kill", a.index) for a in alive] + [("power",)]
            default: Choice = ("run", last.index) if last is not None and self.enabled(last) else ("run", enabled[0].index)
            depth = len(self.trace)
            taken = self.prefix[depth] if depth < len(self.prefix) else default
            if taken not in choices:
                raise AssertionError(f"replay diverged at step {depth + 1}: {taken} not among {choices}")
            cost = 0
            if (taken[0] == "run" and taken != default and last is not None and self.enabled(last)
                    and not last.done) or taken[0] in ("kill", "power"):
                cost = 1
            what = self._apply(taken)
            self.trace.append(Step(choices, taken, default, cost, what))
            self.steps += 1
            if taken[0] == "run":
                last = self.actors[taken[1]]
            self.check_state()
            if taken[0] == "power":
                return

    def _apply(self, choice: Choice) -> str:
        if choice[0] == "run":
            actor = self.actors[choice[1]]
            what = f"{actor.name}: {actor.pending}"
            self.runner = actor
            self._resume(actor)
            return what
        self.runner = None
        self.crash_budget -= 1
        victims = [self.actors[choice[1]]] if choice[0] == "kill" else [a for a in self.actors if not a.done]
        for actor in victims:
            actor.killed = True
            self.fs.close_all(actor)
        if choice[0] == "power":
            visible = self.fs.visible_data(self.sentinel)
            standing = _generation(visible) if visible is not None else None
            self.fs.power_loss()
            self.powered_off = True
            self._check_power_loss(self.acknowledged[-1] if self.acknowledged else None, standing)
        for actor in victims:
            self._resume(actor)
        return f"{choice[0]} " + ", ".join(a.name for a in victims)

    def _resume(self, actor: Actor) -> None:
        """Run `actor` to its next scheduling point (or its end: a killed actor raises
        `ActorKilled` there and ends)."""
        assert actor.glet is not None
        self.current = actor
        try:
            actor.glet.switch()
        finally:
            self.current = None

    def _finish(self) -> None:
        """After the actors: no actor failed unexpectedly; a fresh writer can arm (invariant 5)."""
        for actor in self.actors:
            if actor.error is not None and not isinstance(actor.error, (ActorKilled,)):
                from hermes_estop.model.errors import EstopError

                if not isinstance(actor.error, EstopError):
                    self.fail(0, f"{actor.name} raised {type(actor.error).__name__}: {actor.error}")
                    return
        self.runner = None
        try:
            self.store_factory(self.root).engage(
                self.location, EngageRequest(reason="recovery", expires_at=T0 + timedelta(days=1)), T0, "recovery")
        except AssertionError as exc:
            self.fail(5, f"a fresh writer cannot arm after the run: {exc}")
            return
        self.check_state()


# -- exploring -------------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    bound: int
    executions: int = 0
    states: int = 0
    crashed: int = 0  # executions with a kill or a power loss in them
    violation: Violation | None = None

    def summary(self) -> str:
        found = "no violation" if self.violation is None else f"VIOLATION of invariant {self.violation.invariant}"
        return (f"{self.scenario}: {self.executions} interleavings explored ({self.crashed} with a crash), "
                f"{self.states} states checked (bound {self.bound}): {found}")


def explore(scenario: Scenario, root: Path, bound: int, store_factory: Callable[[Path], FileStore] = FileStore,
            crashes: int = 1, limit: int = 200_000) -> Result:
    """Every schedule of `scenario` with at most `bound` preemptions plus crashes (at most
    `crashes` of them crashes); stops at the first violation."""
    start: dict[str, Any] = {}
    return explore_runs(scenario.name, lambda prefix: Execution(scenario, root, prefix, store_factory, crashes, start).run(),
                        bound, crashes, limit)


def explore_runs(name: str, run: Callable[[list[Choice]], Any], bound: int, crashes: int = 1,
                 limit: int = 200_000) -> Result:
    """`explore` over any execution: `run(prefix)` returns a finished run with `trace` and
    `violation` (the PostgreSQL checker's runs too)."""
    result = Result(name, bound)
    stack: list[list[Choice]] = [[]]
    while stack:
        prefix = stack.pop()
        exe = run(prefix)
        result.executions += 1
        result.states += len(exe.trace) + 1
        result.crashed += any(step.taken[0] != "run" for step in exe.trace)
        if exe.violation is not None:
            result.violation = exe.violation
            return result
        if result.executions >= limit:
            raise AssertionError(f"{name}: more than {limit} executions at bound {bound}")
        spent = 0
        crashed = 0
        for depth, step in enumerate(exe.trace):
            if depth >= len(prefix):
                for alt in step.choices:
                    if alt == step.taken:
                        continue
                    cost = _cost(step, alt, exe.trace, depth)
                    is_crash = alt[0] != "run"
                    if spent + cost <= bound and crashed + is_crash <= crashes:
                        stack.append([s.taken for s in exe.trace[:depth]] + [alt])
            spent += step.cost
            crashed += step.taken[0] != "run"
    return result


def _cost(step: Step, alt: Choice, trace: list[Step], depth: int) -> int:
    if alt[0] != "run":
        return 1
    previous = next((s.taken for s in reversed(trace[:depth]) if s.taken[0] == "run"), None)
    # a switch away from the actor that could have gone on is a preemption
    return 1 if previous is not None and step.default == previous and alt != previous else 0


def replay(scenario: Scenario, root: Path, schedule: Sequence[Choice],
           store_factory: Callable[[Path], FileStore] = FileStore, crashes: int = 1) -> Execution:
    """Run exactly `schedule` again (a violation's `[s.taken for s in violation.schedule]`)."""
    return Execution(scenario, root, schedule, store_factory, crashes).run()


def _generation(body: bytes) -> str | None:
    hold, _ = _parsed(body)
    return hold.generation if hold is not None else None


# The invariants read the same few bodies and trails in tens of thousands of states: each is
# parsed once (pure functions of the bytes; the checked code's own reads are never cached).

@functools.lru_cache(maxsize=1 << 14)
def _parsed(body: bytes) -> tuple[Any, str | None]:
    """(the hold, None) for a complete body; (None, why) for one `parse_body` refuses."""
    try:
        return parse_body(body), None
    except ValueError as exc:
        return None, str(exc)


@functools.lru_cache(maxsize=1 << 14)
def _events(trail: bytes) -> tuple[tuple[int, dict[str, Any]], ...]:
    """(line number, event) of every line of an audit trail that parses (a torn last line does not)."""
    events = []
    for number, line in enumerate(trail.splitlines()):
        try:
            events.append((number, json.loads(line)))
        except ValueError:
            continue
    return tuple(events)


@functools.lru_cache(maxsize=1 << 14)
def _armed(trail: bytes) -> frozenset[str]:
    """The generations an audit trail's engage and re-arm lines name."""
    return frozenset(event["generation"] for _, event in _events(trail)
                     if event.get("event") in ENGAGES and event.get("generation"))
