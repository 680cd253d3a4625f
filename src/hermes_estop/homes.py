"""Homes, the fleet root, and the locations a process must honour (DESIGN 2).

A `Location` names where a hold can live: the fleet root (`scope == "fleet"`), a profile home
(`scope == "<profile name>"`), or a stand-alone home outside any fleet layout. The file store keeps
the sentinel in `location.path`; the PostgreSQL store keys its row on `location.key`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .errors import InvalidArgument

__all__ = [
    "SENTINEL_NAME",
    "FLEET",
    "Location",
    "Layout",
    "resolve_layout",
    "validate_profile_name",
]

SENTINEL_NAME = "ESTOP"
FLEET = "fleet"
PROFILES_DIR = "profiles"
_PROFILE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_profile_name(name: str) -> str:
    """A profile name is a directory name under `R/profiles`: no separators, no dot-dot."""
    if not isinstance(name, str) or not _PROFILE_RE.fullmatch(name) or name == FLEET:
        raise InvalidArgument(
            f"invalid profile name {name!r}: use letters, digits, '.', '_' or '-' (not {FLEET!r})"
        )
    return name


@dataclass(frozen=True)
class Location:
    """One place a hold can live. `scope` is what an operator reads: "fleet" or a profile name;
    `path` is the directory holding the sentinel."""

    scope: str
    path: Path

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


@dataclass(frozen=True)
class Layout:
    """The resolved homes of one process: its own home, the fleet root, and its profile."""

    home: Path
    root: Path

    @property
    def profile(self) -> str | None:
        """The profile this home serves, when it is `R/profiles/<name>`; None for the root."""
        if self.home.parent == self.root / PROFILES_DIR:
            return self.home.name
        return None

    @property
    def fleet(self) -> Location:
        return Location(FLEET, self.root)

    @property
    def own(self) -> Location:
        """The location `hermes pause` (without `--fleet`) writes."""
        if self.home == self.root:
            return self.fleet
        profile = self.profile
        if profile is not None:
            return Location(profile, self.home)
        return Location(f"home:{self.home}", self.home)

    @property
    def candidates(self) -> tuple[Location, ...]:
        """Own home first, then the fleet root, deduplicated after resolving."""
        own = self.own
        return (own,) if own == self.fleet else (own, self.fleet)

    def for_profile(self, name: str) -> "Layout":
        """The layout of a process serving profile `name` in this fleet."""
        return Layout(home=self.root / PROFILES_DIR / validate_profile_name(name), root=self.root)

    def location(self, scope: str) -> Location:
        """The location of a scope name: "fleet" or a profile name."""
        if scope == FLEET:
            return self.fleet
        return self.for_profile(scope).own


def _resolved(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.expanduser(os.fspath(path))).resolve()


def resolve_layout(env: Mapping[str, str] | None = None) -> Layout:
    """DESIGN 2: root is `$HERMES_ROOT`, else derived from `$HERMES_HOME` when that is
    `<R>/profiles/<name>`, else `$HERMES_HOME`, else `~/.hermes`."""
    env = os.environ if env is None else env
    home_value = env.get("HERMES_HOME") or ""
    root_value = env.get("HERMES_ROOT") or ""
    home = _resolved(home_value) if home_value else None
    if root_value:
        root = _resolved(root_value)
    elif home is not None and home.parent.name == PROFILES_DIR:
        root = home.parent.parent
    elif home is not None:
        root = home
    else:
        root = _resolved("~/.hermes")
    return Layout(home=home if home is not None else root, root=root)
