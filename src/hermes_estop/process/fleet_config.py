"""Which store a fleet uses: `$HERMES_ESTOP_STORE`, else `store = "..."` in `estop.toml` in the
fleet root, else the file store. `--store` on the CLI sets the environment variable.

The configuration is read the way every file in a fleet root is (`fsutil.read_regular`: never
blocks on a FIFO, refuses a directory or a symlink). A configuration that cannot be read is not
"no configuration": the process cannot know which store holds the fleet's holds, so
`configured_store` answers with an `UnavailableStore` (every location reads as held, every
write fails with one line naming the problem) instead of raising or silently using the file
store.
"""

from __future__ import annotations

import os

from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.homes import Layout
from hermes_estop.model.text import printable
from hermes_estop.system.fsread import MAX_CONFIG_BYTES, read_config

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `hermes check` imports this module
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable, Mapping
    from pathlib import Path
    from typing import Protocol

    from hermes_estop.fleet.fleet import Fleet

    class _Process(Protocol):
        """What `check_components` and `check_profile` read of an `Estop`: its layout and its fleet."""

        @property
        def layout(self) -> Layout: ...

        @property
        def fleet(self) -> Fleet: ...

    from hermes_estop.stores.base import HoldStore

__all__ = ["CONFIG_FILE", "KNOWN_KEYS", "MAX_CONFIG_BYTES", "STORE_ENV", "check_components", "check_profile",
           "check_store_option", "child_environment", "configured_store", "declared_components", "read_config",
           "store_spec", "use_store"]

CONFIG_FILE = "estop.toml"
STORE_ENV = "HERMES_ESTOP_STORE"
#: the keys `estop.toml` may hold; any other is warned about (once per process), naming it
# `[audit]`: stores.audit_log.audit_table; `[http]`: api.transport; `[policy]`: model.policy
KNOWN_KEYS = frozenset({"store", "notify", "audit", "components", "http", "policy"})

# (config path, key) pairs already warned about: a long-running process warns once, not per read
_warned: set[tuple[str, str]] = set()


def _warn_unknown(path: Path, keys: list[str]) -> None:
    """One WARNING per unknown key per process (`logging` is imported only when there is one:
    `hermes check` on a clean configuration never loads it). With no logging configured, the
    warning reaches stderr through logging's last-resort handler."""
    fresh = [key for key in keys if (str(path), key) not in _warned]
    if not fresh:
        return
    import logging

    log = logging.getLogger("hermes_estop")
    for key in fresh:
        _warned.add((str(path), key))
        log.warning("%s: unknown key %r ignored (known keys: %s)", printable(path), printable(key),
                    ", ".join(sorted(KNOWN_KEYS)))


#: the store this process's command line chose (`hermes --store URL ...`), if any: it outranks
#: `$HERMES_ESTOP_STORE` and `estop.toml` for this process and the processes it starts
_CHOSEN: list[str] = []


def use_store(spec: str) -> None:
    """Record the store the command line chose (`--store`, already checked by
    `check_store_option`). Explicit process state, not a write to `os.environ`: what the
    processes this one starts should see is given to them by `child_environment`."""
    _CHOSEN[:] = [spec]


def child_environment() -> dict[str, str]:
    """The environment for a process this one starts (a gated command, a cron job, a kanban
    worker, a maintenance task): this process's, with the store the command line chose named in
    `$HERMES_ESTOP_STORE`, so a `hermes check` inside it reads the same store."""
    env = dict(os.environ)
    if _CHOSEN:
        env[STORE_ENV] = _CHOSEN[0]
    return env


def store_spec(layout: Layout, env: Mapping[str, str] | None = None) -> str | None:
    """The configured store spec (None: the file store): the command line's choice (when `env`
    is this process's), else `$HERMES_ESTOP_STORE`, else `estop.toml`. `InvalidArgument`, naming
    the file and the problem, when `estop.toml` exists but cannot be read or says something
    invalid."""
    if env is None:
        # `--store ''` chose "no override": the configuration file decides
        env = {STORE_ENV: _CHOSEN[0]} if _CHOSEN else os.environ
    spec = env.get(STORE_ENV)
    if spec:
        return spec.strip()
    path = layout.root / CONFIG_FILE
    data = read_config(path)
    if data is None:
        return None
    unknown = sorted(key for key in data if key not in KNOWN_KEYS)
    if unknown:
        _warn_unknown(path, unknown)
    value = data.get("store")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"invalid config {printable(path)}: 'store' must be a string, not {printable(repr(value))}")
    return value.strip() or None


def configured_store(layout: Layout, env: Mapping[str, str] | None = None) -> HoldStore:
    """The store this process's configuration names. Never raises: a configuration that cannot
    be read, or names a store that cannot be opened, gives an `UnavailableStore` carrying the
    reason with what to do, so readers hold (never free, never a crash, never a hang) and
    writers fail with that one line."""
    from hermes_estop.stores import open_store

    try:
        return open_store(store_spec(layout, env), layout.root)
    except Exception as exc:  # noqa: BLE001 - any failure to configure the store holds the fleet
        from hermes_estop.model.text import one_line
        from hermes_estop.stores.unavailable import UnavailableStore

        return UnavailableStore(f"{one_line(exc)} (fix or remove the configuration; until then the fleet is held)")


def check_store_option(spec: str) -> str:
    """A `--store` value typed on the command line: input to this one command, so a bad one is
    refused (`InvalidArgument`, one line naming the value, CLI exit 2) instead of reading as
    held the way a broken fleet configuration does. Opens nothing."""
    from hermes_estop.stores import is_postgres_url

    value = spec.strip()
    if not value or value == "file":
        return value
    if is_postgres_url(value):
        from hermes_estop.stores.pg_url import parse_store_url

        parse_store_url(value)
        return value
    raise InvalidArgument(f"invalid --store {printable(repr(spec))}: expected 'file' or a postgresql:// URL")


def declared_components(layout: Layout) -> frozenset[str]:
    """The consumer components `estop.toml` declares (`components = ["billing", ...]`): names a
    consumer of the operator's own gates as, which `pause --only` accepts although no shipped
    consumer has them and none reported them yet. `InvalidArgument`, naming the file, for a
    value that is not a list of component names."""
    path = layout.root / CONFIG_FILE
    data = read_config(path)
    value = None if data is None else data.get("components")
    if value is None:
        return frozenset()
    from hermes_estop.model.errors import EstopError
    from hermes_estop.model.selector import Selector

    if not isinstance(value, list):
        raise InvalidArgument(f"invalid config {printable(path)}: 'components' must be a list of names, "
                              f"not {printable(repr(value))}")
    try:
        selector = Selector.of(value)
    except EstopError as exc:
        raise InvalidArgument(f"invalid config {printable(path)}: 'components': {exc}") from None
    return selector.components if selector is not None else frozenset()


def check_components(estop: _Process, only: Iterable[str] | None, what: str = "--only") -> None:
    """Refuse `only` (`--only NAME`, the API's `only`) when nothing gates as NAME: no shipped
    consumer, no component declared in estop.toml (`components`), no registered consumer that
    reported it; `InvalidArgument` with a did-you-mean, naming `what`. The registry is read only
    for a name the first two do not know; one that cannot be read counts as none (declare the
    name in estop.toml). Every door that arms a scoped hold calls this (the CLI, the API, the page)."""
    names = list(only or ())
    if not names:  # a full hold (`hermes pause`): nothing to check, nothing more to import
        return
    import contextlib

    from hermes_estop.model.errors import StoreError
    from hermes_estop.model.selector import COMPONENTS, unknown_components

    known = set(COMPONENTS) | declared_components(estop.layout)
    if unknown_components(names, known) is None:
        return
    with contextlib.suppress(StoreError, OSError):
        known |= {entry.component for entry in estop.fleet.consumers().entries()}
    problem = unknown_components(names, known)
    if problem is not None:
        raise InvalidArgument(f"{what}: {problem}")


def check_profile(estop: _Process, profile: str) -> None:
    """Refuse a resume of profile `profile` when this fleet has no such profile (a typo), with a
    did-you-mean, before anything is written: a resume takes the scope's lock, which would make
    the profile's home, and the profile would show on the timeline from then on. The CLI and
    the API (`DELETE /api/v1/holds/NAME`, a resume over --server) both call this."""
    from hermes_estop.model.text import did_you_mean

    known = [location.scope for location in estop.fleet.scopes()[1:]]
    if profile not in known:
        listed = ", ".join(printable(name) for name in known) or "none"
        raise InvalidArgument(f"no profile {profile!r} in this fleet: {did_you_mean(profile, known)}"
                              f"(profiles: {listed}); nothing was resumed")
