"""How a bad window is reported: `InvalidWindow` (one line naming the file, the window and the
field) and the translation of pydantic's `ValidationError` into it.

Kept apart from the model (`model.py`) because it is a job of its own: the model says what a
window is, this module says how a refusal reads, the same for `windows.toml`, `hermes windows
add` and `hermes windows validate`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from ..errors import EstopError

__all__ = ["InvalidWindow", "ShapeError", "as_invalid"]


class InvalidWindow(EstopError, ValueError):
    """A window definition (or `windows.toml`) that does not validate. The message names the
    file (when there is one), the window and the field; the parts are kept as attributes."""

    def __init__(self, message: str, *, path: Path | None = None, window: str | None = None,
                 field: str | None = None) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if window is not None:
            where.append(f"window {window}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(": ".join(where + [message]))
        self.path = path
        self.window = window
        self.field = field
        self.detail = message


class ShapeError(ValueError):
    """A model-level rule broken (raised by a model validator); carries the field to name,
    since pydantic reports a model validator's error without a location."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def as_invalid(exc: ValidationError, path: Path | None, label: str | None, fields: Iterable[str]) -> InvalidWindow:
    """The first of `exc`'s errors as one `InvalidWindow` line (with a count of the others);
    `fields`: the model's field names, listed when an unknown one is given."""
    errors = exc.errors()
    first = errors[0]
    loc = [str(part) for part in first.get("loc", ())]
    cause = (first.get("ctx") or {}).get("error")
    field: str | None
    if isinstance(cause, ShapeError):
        field = cause.field
        message = str(cause)
    else:
        field = ".".join(loc) if loc else None
        if isinstance(cause, Exception):
            message = str(cause)
        elif first.get("type") == "extra_forbidden":
            message = f"unknown field (expected one of {', '.join(fields)})"
            if loc and loc[0] == "allow":
                message = "unknown field (expected user_ids, profiles)"
        elif first.get("type") == "missing":
            message = "required"
        else:
            message = f"{first.get('msg', 'invalid')} (got {first.get('input')!r})"
    more = len(errors) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return InvalidWindow(message, path=path, window=label, field=field)
