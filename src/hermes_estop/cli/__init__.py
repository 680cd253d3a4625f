"""The `hermes` command. `python -m hermes_estop` runs the same program.

`main` sends a well-formed `hermes check` / `hermes gate` straight to `cli.hot` (no CLI framework
to start: they run from crontab lines and timers) and everything else to the Typer app in
`cli.application`. Exit codes: 0 success or "may proceed"; 1 held (or the named generation is
not current); 2 invalid input, with one line on stderr naming the bad value; 75 `hermes gate`
held (default); 127 `hermes gate` command not found; 70 an internal error; 130 interrupted.
"""

from __future__ import annotations

import os
import sys
from hermes_estop.model.errors import EstopError
from hermes_estop.cli.hot import EXIT_USAGE, try_hot_path

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: every `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["app", "main", "say_on_interrupt"]


def _say(message: str) -> None:
    print(f"hermes: {' '.join(message.split())}", file=sys.stderr)


#: what an interrupt of the running command leaves, said after "interrupted" (set by a command
#: that writes, before it writes: `say_on_interrupt`); None: nothing to say
_interrupt_note: Callable[[], str] | None = None


def say_on_interrupt(note: Callable[[], str] | None) -> None:
    """From here on, an interrupt of this command (Ctrl-C wherever it lands, in the command
    or in the framework winding down after it) says "interrupted; " and what `note()` returns:
    what is on disk now (issue 46 item 3). Typer turns a `KeyboardInterrupt` inside it into a
    silent exit 130, so a command that sets a note exits 130 only when interrupted."""
    global _interrupt_note  # one command runs per `main` call
    _interrupt_note = note


def _interrupted() -> str:
    note, message = _interrupt_note, "interrupted"
    if note is not None:
        try:
            message = f"interrupted; {note()}"
        except Exception:  # noqa: BLE001 - the interrupt is said whatever the read-back does
            message = "interrupted (what is on disk now could not be read: see `hermes status`)"
    return message


def __getattr__(name: str) -> Any:
    """`hermes_estop.cli.app`, the full Typer app, built on first use."""
    if name == "app":
        from hermes_estop.cli.application import build_app

        globals()["app"] = built = build_app()
        return built
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None, *, hot_path: bool = True) -> int:
    """Console-script entry: runs the command and maps every error to one line and an exit code.
    `hot_path=False` sends even `check` / `gate` through the Typer app."""
    args = list(argv) if argv is not None else sys.argv[1:]
    say_on_interrupt(None)
    try:
        # a shell asking for completions goes to the full app, whatever the words so far
        code = try_hot_path(args) if hot_path and "_HERMES_COMPLETE" not in os.environ else None
        if code is not None:
            return code
        from hermes_estop.cli.application import run_app

        code = run_app(args)
        if code == 130 and _interrupt_note is not None:  # the framework's silent exit for Ctrl-C
            _say(_interrupted())
        return code
    except KeyboardInterrupt:
        _say(_interrupted())
        return 130
    except EstopError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one line, never a traceback; HERMES_DEBUG=1 shows it
        if os.environ.get("HERMES_DEBUG"):
            raise
        _say(f"internal error: {type(exc).__name__}: {exc}")
        return 70
