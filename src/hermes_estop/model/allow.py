"""Deprecated: the allowlist joined the hold whose body carries it; import `Allow`, `NOBODY` and
`parse_allow` from `hermes_estop.model.hold`.

A file rather than an entry of `hermes_estop._MOVED` only while modules of the package still
import this path (windows/plan.py): a type checker does not follow the import hook. Once none
does, delete it and add the `_MOVED` entry (`tests/test_public_api.py` keeps the old path working).
"""

from __future__ import annotations

import warnings

from hermes_estop.model.hold import NOBODY, Allow, parse_allow

__all__ = ["NOBODY", "Allow", "parse_allow"]

warnings.warn("hermes_estop.model.allow is deprecated and will be removed: it is hermes_estop.model.hold now",
              DeprecationWarning, stacklevel=2)
