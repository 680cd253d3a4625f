"""One line for code that cannot be imported (a broken install, a library missing): what is
missing and how to install it, as an `EstopError` (the CLI's exit 2), never a traceback and
never an answer taken without it (a forecast that cannot count the windows is not "free")."""

from __future__ import annotations

import importlib.metadata
import sys

from hermes_estop.model.errors import EstopError
from hermes_estop.model.text import one_line

__all__ = ["missing_code"]


def missing_code(what: str, exc: ImportError) -> EstopError:
    """`EstopError`: cannot `what` because `exc`'s module cannot be imported, and the fix: the
    library's distribution to install, or reinstalling hermes-estop for a part of its own."""
    name = exc.name or ""
    top = name.partition(".")[0]
    if not top or top == "hermes_estop":
        fix = "reinstall hermes-estop: pip install --force-reinstall hermes-estop"
    elif top in sys.stdlib_module_names:
        fix = f"{top!r} is part of Python's standard library: this Python installation is incomplete"
    else:
        dists = importlib.metadata.packages_distributions().get(top) or [top.replace("_", "-")]
        fix = f"install it: pip install {dists[0]} (or reinstall hermes-estop with its dependencies)"
    missing = f"the module {name!r}" if name else "a module it needs"
    return EstopError(f"cannot {what}: {missing} cannot be imported ({one_line(exc)}); {fix}")
