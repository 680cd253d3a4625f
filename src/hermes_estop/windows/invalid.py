"""How a bad window is reported: `InvalidWindow` (one line naming the file, the window and the
field) and the translation of pydantic's `ValidationError` into it.

Kept apart from the model (`model.py`) because it is a job of its own: the model says what a
window is, this module says how a refusal reads, the same for `windows.toml`, `hermes windows
add` and `hermes windows validate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hermes_estop.model.errors import EstopError
from hermes_estop.windows.field_types import NAME_RE

__all__ = ["InvalidWindow", "ShapeError", "as_invalid", "validate_table"]


class InvalidWindow(EstopError, ValueError):
    """A window definition (or `windows.toml`) that does not validate. The message names the
    file (when there is one), the window and the field; the parts are kept as attributes.
    `problems` is every (field, message) found, the first being `field` and `detail`; the
    message names them all, so a typo'd key is never hidden behind the field it left missing."""

    def __init__(self, message: str, *, path: Path | None = None, window: str | None = None,
                 field: str | None = None, problems: Sequence[tuple[str | None, str]] = ()) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if window is not None:
            where.append(f"window {window}")
        every = list(problems) or [(field, message)]
        said = "; ".join(f"field {f!r}: {m}" if f is not None else m for f, m in every)
        super().__init__(": ".join([*where, said]))
        self.path = path
        self.window = window
        self.field = every[0][0]
        self.detail = every[0][1]
        self.problems = tuple(every)

    def to_json(self) -> dict[str, Any]:
        """The parts, for `--json` output: every problem, in the order the message names them."""
        return {"path": str(self.path) if self.path is not None else None, "window": self.window,
                "problems": [{"field": f, "message": m} for f, m in self.problems], "error": str(self)}


class ShapeError(ValueError):
    """A model-level rule broken (raised by a model validator); carries the field to name,
    since pydantic reports a model validator's error without a location."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def as_invalid(exc: ValidationError, path: Path | None, label: str | None, fields: Iterable[str]) -> InvalidWindow:
    """Every one of `exc`'s errors, unknown keys first (a typo'd key explains the field it left
    missing), as one `InvalidWindow`; `fields`: the model's field names, for a suggestion or
    the list of what is expected when an unknown one is given."""
    known = list(fields)
    errors = sorted(exc.errors(), key=lambda error: error.get("type") != "extra_forbidden")
    return InvalidWindow("invalid", path=path, window=label, problems=[_problem(error, known) for error in errors])


def _problem(error: Any, known: list[str]) -> tuple[str | None, str]:
    loc = [str(part) for part in error.get("loc", ())]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ShapeError):
        return cause.field, str(cause)
    field = ".".join(loc) if loc else None
    if isinstance(cause, Exception):
        return field, str(cause)
    if error.get("type") == "extra_forbidden":
        if loc and loc[0] == "allow":
            return field, "unknown field (expected user_ids, profiles)"
        close = get_close_matches(loc[-1], known, n=1, cutoff=0.7) if loc else []
        if close:
            return field, f"unknown field (did you mean {close[0]!r}?)"
        return field, f"unknown field (expected one of {', '.join(known)})"
    if error.get("type") == "missing":
        return field, "required"
    return field, f"{error.get('msg', 'invalid')} (got {error.get('input')!r})"


def validate_table(model: Any, data: Any, *, path: Path | None, index: int | None, kind: str = "") -> Any:
    """`model` validated from one `windows.toml` table (a window, a calendar: `kind`): `InvalidWindow`
    naming the file, the table (its name, else its position) and every bad field, never
    pydantic's own error."""
    name = data.get("name") if isinstance(data, dict) else None
    label = repr(name) if isinstance(name, str) and NAME_RE.fullmatch(name) else (
        f"{kind}#{index + 1}" if index is not None else None)
    if not isinstance(data, dict):
        raise InvalidWindow(f"expected a table, got {type(data).__name__}", path=path, window=label)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise as_invalid(exc, path, label, model.model_fields) from None
