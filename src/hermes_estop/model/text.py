"""Text that reaches a person: every human-facing line goes through `printable`, so a reason or an
id written by hand into a sentinel, a window file or the audit trail can never drive the terminal
(escape sequences) or reorder what is shown (bidirectional overrides). `--json` output keeps the
exact value; only what is printed for a person is escaped."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: the check path imports this module
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["did_you_mean", "printable", "one_line", "unsafe_char"]

# Bidirectional embeddings, overrides and isolates, and the marks: they reorder what follows them.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or ch in _BIDI or ch in "\u2028\u2029"


def unsafe_char(text: str) -> str | None:
    """The first control character or bidirectional override in `text`, or None."""
    for ch in text:
        if _unsafe(ch):
            return ch
    return None


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`str(value)` with every control character and bidirectional override shown as an escape
    (`\\x1b`, `\\u202e`); a backslash stays a backslash. Cheap when there is nothing to escape."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable() and _BIDI.isdisjoint(text):
        return text
    return "".join(_escape(ch) if _unsafe(ch) else ch for ch in text)


def one_line(value: object) -> str:
    """A message folded onto one line (whitespace runs become one space) and made `printable`;
    for an exception with no text, its type's name."""
    text = " ".join(str(value).split())
    if not text and isinstance(value, BaseException):
        text = type(value).__name__
    return printable(text)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`did you mean 'x'? ` for the closest of `known` (an iterable of names) to a `name` that is
    not among them, or nothing when none is close."""
    from difflib import get_close_matches

    names = sorted(known)
    close = get_close_matches(name, names, n=1, cutoff=0.6)
    if not close:  # `NIGHTLY` for `nightly`: compared again with case folded
        folded = {n.casefold(): n for n in reversed(names)}
        close = [folded[m] for m in get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.6)]
    return f"did you mean '{printable(close[0])}'? " if close else ""
