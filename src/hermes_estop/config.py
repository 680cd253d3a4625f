"""Which store a fleet uses: `$HERMES_ESTOP_STORE`, else `store = "..."` in `estop.toml` in the
fleet root, else the file store. `--store` on the CLI sets the environment variable."""

from __future__ import annotations

import os
from typing import Mapping

from .errors import InvalidArgument
from .homes import Layout

__all__ = ["CONFIG_FILE", "STORE_ENV", "store_spec"]

CONFIG_FILE = "estop.toml"
STORE_ENV = "HERMES_ESTOP_STORE"


def store_spec(layout: Layout, env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    spec = env.get(STORE_ENV)
    if spec:
        return spec.strip()
    path = layout.root / CONFIG_FILE
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidArgument(f"invalid config {path}: {exc.strerror or exc}") from None
    import tomllib

    try:
        with handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgument(f"invalid config {path}: {exc}") from None
    value = data.get("store")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"invalid config {path}: 'store' must be a string, not {value!r}")
    return value.strip() or None
