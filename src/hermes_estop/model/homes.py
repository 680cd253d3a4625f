"""Homes, the fleet root, and the locations a process must honour (docs/design.md §2).

A `Location` names where a hold can live: the fleet root (`scope == "fleet"`), a profile home
(`scope == "<profile name>"`), or a stand-alone home outside any fleet layout. The file store keeps
the sentinel in `location.path`; the PostgreSQL store keys its row on `location.key`.

The fleet root `R`, first match wins (`resolve_layout`):

1. `$HERMES_ROOT`, when set (hermes-estop's own override; hermes-agent has none);
2. `~/.hermes`, when `$HERMES_HOME` lies under it (`~/.hermes/custom`,
   `~/.hermes/profiles/ops/sub`), as hermes-agent's `get_default_hermes_root` derives it;
3. `<R>`, when `$HERMES_HOME` is `<R>/profiles/<name>` (a fleet kept elsewhere);
4. `$HERMES_HOME` itself;
5. `~/.hermes` when neither variable is set.

`Layout.candidates` is THE one builder of the locations a process honours (its own home, then
the fleet root); `Layout.for_profile(name)` is the same fleet seen from profile `name`. A home
at `R/profiles/<name>` whose name `validate_profile_name` refuses (`fleet`, `.hidden`, ...) is
not a profile home: `Layout.own` raises for writes, and its candidate location carries the
refusal in `Location.problem`, which readers report as an unreadable hold (held).
"""

from __future__ import annotations

import os
from pathlib import Path

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.record import Record, set_field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FLEET",
    "SENTINEL_NAME",
    "Layout",
    "Location",
    "profile_names",
    "resolve_layout",
    "validate_profile_name",
]

SENTINEL_NAME = "ESTOP"
FLEET = "fleet"
PROFILES_DIR = "profiles"
_PROFILE_RE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"  # compiled by `re` on first use


def _profile_refusal(name: object) -> str | None:
    import re

    if not isinstance(name, str) or not re.fullmatch(_PROFILE_RE, name) or name == FLEET:
        return f"invalid profile name {name!r}: use letters, digits, '.', '_' or '-' (not {FLEET!r})"
    return None


def validate_profile_name(name: object) -> str:
    """A profile name is a directory name under `R/profiles`: no separators, no dot-dot, and
    never `fleet` (the fleet-wide scope's name). Any value may be given (a window file's or a
    consumer's field): one that is not text is refused like a bad name."""
    why = _profile_refusal(name)
    if why is not None or not isinstance(name, str):
        raise InvalidArgument(why or f"invalid profile name {name!r}")
    return name


class Location(Record):
    """One place a hold can live. `scope` is what an operator reads: "fleet" or a profile name;
    `path` is the directory holding the sentinel. `problem` is set only on the location of a
    home that is not a usable profile home (see the module docstring): it is never read from
    a store, it reads as held with that problem."""

    __slots__ = ("scope", "path", "problem")  # noqa: RUF023 (constructor order)
    scope: str
    path: Path
    problem: str | None

    def __init__(self, scope: str, path: Path, problem: str | None = None) -> None:
        set_field(self, "scope", scope)
        set_field(self, "path", path)
        set_field(self, "problem", problem)

    @property
    def is_fleet(self) -> bool:
        return self.scope == FLEET

    @property
    def key(self) -> str:
        """Stable identifier of this location across hosts (the database row key)."""
        return self.scope

    @property
    def sentinel(self) -> Path:
        return self.path / SENTINEL_NAME

    def describe(self) -> str:
        if self.is_fleet:
            return "fleet"
        if self.scope.startswith("home:"):
            return f"home {self.path}"
        return f"profile {self.scope}"


class Layout(Record):
    """The resolved homes of one process: its own home, the fleet root, and its profile."""

    __slots__ = ("home", "root")
    home: Path
    root: Path

    def __init__(self, home: Path, root: Path) -> None:
        set_field(self, "home", home)
        set_field(self, "root", root)

    @property
    def profile(self) -> str | None:
        """The profile this home serves, when it is `R/profiles/<name>` with a valid name;
        None for the root, a stand-alone home, or a refused name (see `refusal`)."""
        if self.home.parent == self.root / PROFILES_DIR and _profile_refusal(self.home.name) is None:
            return self.home.name
        return None

    @property
    def refusal(self) -> str | None:
        """Why this home is not usable, or None: it is `R/profiles/<name>` with a name the
        profile-name rules refuse (`fleet` would otherwise alias the fleet-wide scope)."""
        if self.home.parent != self.root / PROFILES_DIR:
            return None
        why = _profile_refusal(self.home.name)
        if why is None:
            return None
        return f"HERMES_HOME {self.home} is not a valid profile home ({why})"

    @property
    def fleet(self) -> Location:
        return Location(FLEET, self.root)

    @property
    def own(self) -> Location:
        """The location `hermes pause` (without `--fleet`) writes. `InvalidArgument` (one line)
        for a refused profile home: a write there must never alias another scope."""
        refusal = self.refusal
        if refusal is not None:
            raise InvalidArgument(refusal)
        return self._own()

    def _own(self) -> Location:
        if self.home == self.root:
            return self.fleet
        profile = self.profile
        if profile is not None:
            return Location(profile, self.home)
        return Location(f"home:{self.home}", self.home, self.refusal)

    @property
    def candidates(self) -> tuple[Location, ...]:
        """THE candidate locations of this process: own home first, then the fleet root,
        deduplicated after resolving. A refused profile home is kept, carrying its problem,
        so that readers hold on it instead of silently ignoring it."""
        own = self._own()
        return (own,) if own == self.fleet else (own, self.fleet)

    def for_profile(self, name: str) -> Layout:
        """The layout of a process serving profile `name` in this fleet."""
        return Layout(home=self.root / PROFILES_DIR / validate_profile_name(name), root=self.root)

    def location(self, scope: str) -> Location:
        """The location of a scope name: "fleet" or a profile name."""
        if scope == FLEET:
            return self.fleet
        return self.for_profile(scope).own


def profile_names(root: Path) -> list[str]:
    """The profile homes that exist under fleet root `root` (directories of `profiles/` whose
    names the profile rules accept), sorted: where a hold of the fleet can stand besides the
    root. An unlistable `profiles/` has none."""
    base = root / PROFILES_DIR
    try:
        names = os.listdir(base)
    except OSError:
        return []
    return sorted(name for name in names if _profile_refusal(name) is None and (base / name).is_dir())


def _resolved(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.expanduser(os.fspath(path))).resolve()


def _native_root(env: Mapping[str, str]) -> Path:
    """`~/.hermes` of the user, `HOME` taken from `env` when it names one."""
    user_home = env.get("HOME")
    base = Path(user_home) if user_home else Path(os.path.expanduser("~"))
    return (base / ".hermes").resolve()


def _is_within(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


def resolve_layout(env: Mapping[str, str] | None = None) -> Layout:
    """docs/design.md §2, in the order the module docstring lists: `$HERMES_ROOT`; `~/.hermes` when
    `$HERMES_HOME` lies under it; `<R>` for a home `<R>/profiles/<name>`; `$HERMES_HOME`;
    `~/.hermes`."""
    env = os.environ if env is None else env
    home_value = env.get("HERMES_HOME") or ""
    root_value = env.get("HERMES_ROOT") or ""
    home = _resolved(home_value) if home_value else None
    if root_value:
        root = _resolved(root_value)
    elif home is None:
        root = _native_root(env)
    else:
        native = _native_root(env)
        if _is_within(home, native):
            root = native
        elif home.parent.name == PROFILES_DIR:
            root = home.parent.parent
        else:
            root = home
    return Layout(home=home if home is not None else root, root=root)
