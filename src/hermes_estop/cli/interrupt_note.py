"""What an interrupted command says it left (issue 46 item 3): a command that writes sets a note
before it writes (`say_on_interrupt`), and `hermes_estop.cli.main` says "interrupted; " and the
note wherever the interrupt lands, in the command or in the framework winding down after it.
Typer turns a `KeyboardInterrupt` inside it into a silent exit 130, so a command that sets a note
exits 130 only when interrupted."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: every `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["interrupted", "pending", "say_on_interrupt"]

#: what an interrupt of the running command leaves; None: nothing to say
_note: Callable[[], str] | None = None


def say_on_interrupt(note: Callable[[], str] | None) -> None:
    """From here on, an interrupt of this command says "interrupted; " and what `note()` returns
    (what is on disk now); None: only "interrupted". `main` clears it before each command."""
    global _note  # one command runs per `main` call
    _note = note


def pending() -> bool:
    """Whether the running command set a note."""
    return _note is not None


def interrupted() -> str:
    """The interrupted line's text: "interrupted", and the note when one is set."""
    note = _note
    if note is None:
        return "interrupted"
    try:
        return f"interrupted; {note()}"
    except Exception:  # noqa: BLE001 - the interrupt is said whatever the read-back does
        return "interrupted (what is on disk now could not be read: see `hermes status`)"
