"""What a scoped hold covers (issue 26): consumer components, and within them units of work by
name glob. A hold without a selector covers everything, as before.

Only a body that carries scoped holds ever builds a `Selector`, so `fnmatch` (which imports `re`)
is imported here, never on the check path of a fleet with no scoped hold.
"""

from __future__ import annotations

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.record import Record, set_field
from hermes_estop.model.text import printable, unsafe_char

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    #: the names of one unit of work: a name, or several (a kanban card: assignee and title; None: unnamed)
    WorkNames = str | Iterable[str | None] | None

__all__ = ["COMPONENTS", "Selector", "compile_globs", "holds_at_least", "hull", "parse_selector",
           "selector_of_detail", "unknown_components", "work_names"]

#: the components the shipped consumers gate as (the cron, kanban, gateway and APScheduler
#: adapters); user code may name its own
COMPONENTS = ("cron", "kanban", "gateway", "apscheduler")
_MAX_NAME = 128
_MAX_ITEMS = 64


def work_names(job: WorkNames) -> tuple[str, ...]:
    """The names of one unit of work: a name, or several (a kanban card: assignee and title)."""
    if job is None:
        return ()
    if isinstance(job, str):
        return (job,)
    return tuple(str(name) for name in job if name is not None)


class Selector(Record):
    """`components` (exact names; empty: every component) and `jobs` (globs over a unit's names,
    case-sensitive like every id here; empty: every unit). `problem` is set when a body's selector
    could not be read: such a selector covers everything (fail safe)."""

    __slots__ = ("components", "jobs", "problem", "_match")  # noqa: RUF023 (constructor order)
    components: frozenset[str]
    jobs: tuple[str, ...]
    problem: str | None
    _match: Callable[[str], Any] | None

    def __init__(self, components: frozenset[str] = frozenset(), jobs: tuple[str, ...] = (),
                 problem: str | None = None) -> None:
        set_field(self, "components", components)
        set_field(self, "jobs", jobs)
        set_field(self, "problem", problem)
        set_field(self, "_match", compile_globs(jobs) if jobs else None)

    @classmethod
    def of(cls, components: Iterable[Any] = (), jobs: Iterable[Any] = ()) -> Selector | None:
        """Operator input (`--only`, `--job`, `only =`, `jobs =`); None when both are empty (a
        full hold). Refuses, naming it, an empty, overlong or control-character name."""
        if isinstance(components, str):
            components = [components]
        if isinstance(jobs, str):
            jobs = [jobs]
        names = [_checked(item, "component") for item in components or ()]
        globs = [_checked(item, "job glob") for item in jobs or ()]
        if len(names) > _MAX_ITEMS or len(globs) > _MAX_ITEMS:
            raise InvalidArgument(f"invalid selector: at most {_MAX_ITEMS} components and {_MAX_ITEMS} job globs")
        if not names and not globs:
            return None
        return cls(frozenset(names), tuple(dict.fromkeys(globs)))

    def covers(self, component: str | None, job: WorkNames) -> bool:
        """Whether work of `component` named `job` is under this selector. Work that does not say
        its component, or a unit that does not say its name, is covered (a reader that cannot
        tell must not see less hold)."""
        if self.problem is not None:
            return True
        if component is not None and self.components and component not in self.components:
            return False
        match = self._match
        if match is None:
            return True
        names = work_names(job)
        if not names:
            return True
        return any(match(name) is not None for name in names)

    def to_body(self) -> dict[str, list[str]]:
        return {"components": sorted(self.components), "jobs": list(self.jobs)}

    def describe(self) -> str:
        """`kanban`, `cron:nightly-*`, `*:a,b`, or `everything` for an unreadable selector."""
        if self.problem is not None:
            return "everything (selector unreadable)"
        where = ",".join(sorted(self.components)) or "*"
        shown = where if not self.jobs else f"{where}:{','.join(self.jobs)}"
        return printable(shown)


def unknown_components(names: Iterable[str], known: Iterable[str]) -> str | None:
    """Why `names` (`--only`) name a component nothing gates as, with a did-you-mean (None when
    every one is `known`): a typo would arm a hold that holds nothing that exists."""
    from hermes_estop.model.text import did_you_mean

    known = sorted(set(known))
    for name in names:
        if name in known:
            continue
        guess = did_you_mean(name, known)
        return (f"unknown component '{printable(name)}': {guess}no shipped consumer gates as it and no registered "
                f"consumer reported it (known: {', '.join(printable(k) for k in known)}); declare your own in "
                "estop.toml: components = [\"name\"]")
    return None


def holds_at_least(wide: Selector | None, narrow: Selector | None) -> bool:
    """Whether `wide` covers every unit of work `narrow` covers (None: everything). Decided on
    the names alone, never by guessing what a glob matches: `a*` beside `ab` is not proven to
    hold it, and answers False (a caller treats that as a weakening: the safe side)."""
    if wide is None or wide.problem is not None:
        return True
    if narrow is None or narrow.problem is not None:
        return False
    if wide.components and not (narrow.components and narrow.components <= wide.components):
        return False
    if not wide.jobs or "*" in wide.jobs:
        return True
    return bool(narrow.jobs) and set(narrow.jobs) <= set(wide.jobs)


def hull(a: Selector | None, b: Selector | None) -> Selector | None:
    """The smallest selector of the form (components, globs) holding everything `a` and `b`
    hold: the union of each part, or every value of a part either leaves open. It may hold
    more than the two together (`cron` of `a*` and `kanban` of `b*` give both components of both
    globs): what an unconfirmed edit holds meanwhile errs on the held side."""
    if a is None or b is None or a.problem is not None or b.problem is not None:
        return None
    components = a.components | b.components if a.components and b.components else frozenset()
    jobs = tuple(dict.fromkeys(a.jobs + b.jobs)) if a.jobs and b.jobs else ()
    if not components and not jobs:
        return None
    return Selector(components, jobs)


def _checked(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME:
        raise InvalidArgument(f"invalid {what} {value!r}: expected a non-empty name of at most {_MAX_NAME} characters")
    bad = unsafe_char(value)
    if bad is not None:
        raise InvalidArgument(f"invalid {what} '{printable(value)}': contains the control character '{printable(bad)}'")
    return value


def compile_globs(globs: tuple[str, ...]) -> Callable[[str], Any]:
    """One compiled alternation of every glob: a unit is matched in one regex call."""
    import re
    from fnmatch import translate

    return re.compile("|".join(f"(?:{translate(glob)})" for glob in globs)).match


def parse_selector(value: object) -> Selector:
    """A body's `selector` as a reader takes it; never refuses: a malformed one covers everything."""
    if not isinstance(value, dict):
        return Selector(problem="selector is not an object: covers everything")
    parts: list[list[str]] = []
    for key in ("components", "jobs"):
        items = value.get(key)
        if items is None:
            items = []
        if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
            return Selector(problem=f"selector {key} malformed: covers everything")
        parts.append(items)
    return Selector(frozenset(parts[0]), tuple(dict.fromkeys(parts[1])))


def selector_of_detail(detail: str | None) -> tuple[str, Selector] | None:
    """(hold id, selector) from the audit `detail` of a scoped hold's line
    (`stores.base.scoped_detail`); None for any other line (a full hold's)."""
    if not detail or not detail.startswith("scoped hold "):
        return None
    hold_id, _, rest = detail[len("scoped hold "):].partition(" only ")
    import json

    try:
        body = json.loads(rest)
    except ValueError:
        return hold_id, Selector(problem="selector not on the record: covers everything")
    return hold_id, parse_selector(body)
