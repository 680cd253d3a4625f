"""The `hermes` command. `python -m hermes_estop` runs the same program.

`main` sends a well-formed `hermes check` / `hermes gate` straight to `cli.fast_path` (no CLI framework
to start: they run from crontab lines and timers) and everything else to the Typer app in
`cli.application`. Exit codes: 0 success or "may proceed"; 1 held (or the named generation is
not current); 2 invalid input, with one line on stderr naming the bad value; 75 `hermes gate`
held (default); 127 `hermes gate` command not found; 70 an internal error; 130 interrupted.
"""

from __future__ import annotations

import os
import sys

from hermes_estop.cli import interrupt_note
from hermes_estop.cli.exits import EXIT_USAGE
from hermes_estop.model.errors import EstopError

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: every `hermes check` imports this module
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["app", "main"]

#: the commands `cli.fast_path` may run without the framework: only an argument list with one of
#: these words imports it (`fast_path` vouches for the rest; it is the check path's, not `hermes
#: pause`'s: issue 45)
_HOT_COMMANDS = frozenset({"check", "gate", "history"})


def _say(message: str) -> None:
    """One line on stderr, control characters escaped: an error's text may carry a file's."""
    from hermes_estop.model.text import one_line  # only on the way out: `hermes check` imports this module

    print(f"hermes: {one_line(message)}", file=sys.stderr)


def __getattr__(name: str) -> Any:
    """`hermes_estop.cli.app`, the full Typer app, built on first use."""
    if name == "app":
        from hermes_estop.cli.application import build_app

        globals()["app"] = built = build_app()
        return built
    raise AttributeError(name)


def _what(args: Sequence[str]) -> str:
    """What a refusal says it could not do: run `hermes` with the command's words and options."""
    words = [word for word in args if word.startswith("-") or word.isidentifier()][:4]
    return f"run `hermes {' '.join(words)}`" if words else "run `hermes`"


def main(argv: Sequence[str] | None = None, *, hot_path: bool = True) -> int:
    """Console-script entry: runs the command and maps every error to one line and an exit code.
    `hot_path=False` sends even `check` / `gate` through the Typer app."""
    args = list(argv) if argv is not None else sys.argv[1:]
    interrupt_note.say_on_interrupt(None)
    try:
        # a shell asking for completions goes to the full app, whatever the words so far
        if hot_path and "_HERMES_COMPLETE" not in os.environ and not _HOT_COMMANDS.isdisjoint(args):
            from hermes_estop.cli.fast_path import try_hot_path

            code = try_hot_path(args)
            if code is not None:
                return code
        from hermes_estop.cli.application import run_app

        code = run_app(args)
        if code == 130 and interrupt_note.pending():  # the framework's silent exit for Ctrl-C
            _say(interrupt_note.interrupted())
        return code
    except KeyboardInterrupt:
        _say(interrupt_note.interrupted())
        return 130
    except EstopError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except ImportError as exc:  # a broken install, a library missing: what and how to install it
        from hermes_estop.system.missing_code import missing_code

        _say(f"error: {missing_code(_what(args), exc)}")
        return EXIT_USAGE
    except Exception as exc:  # one line, never a traceback; HERMES_DEBUG=1 shows it
        if os.environ.get("HERMES_DEBUG"):
            raise
        _say(f"internal error: {type(exc).__name__}: {exc}")
        return 70
