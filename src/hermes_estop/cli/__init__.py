"""The `hermes` command (Typer). `python -m hermes_estop` runs the same app.

Exit codes: 0 success or "may proceed"; 1 held (or the named generation is not current);
2 invalid input, with one line on stderr naming the bad value; 75 `hermes gate` held (default);
127 `hermes gate` command not found.
"""

from __future__ import annotations

import os
from typing import Annotated, Optional, Sequence

import typer

try:  # typer >= 0.29 vendors its own click; older releases use the click package
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import UsageError

from ..config import STORE_ENV
from ..errors import EstopError
from . import hold
from .common import EXIT_USAGE, one_line

__all__ = ["app", "main"]

app = typer.Typer(
    name="hermes",
    help="Stop all NEW work in an agent fleet for maintenance, and get it back reliably.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"hermes-estop {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    store: Annotated[Optional[str], typer.Option("--store", help=f"Store URL (file, postgresql://...); default ${STORE_ENV}.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    if store is not None:
        os.environ[STORE_ENV] = store


hold.register(app)


def _register_optional() -> None:
    """Sub-apps of the other packages; each module imports only typer at import time."""
    from . import extensions

    extensions.register(app)


_register_optional()


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry: runs the app and maps errors to one line and an exit code."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=list(argv) if argv is not None else None, prog_name="hermes", standalone_mode=False)
    except UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        typer.echo(f"hermes: error: {where}{one_line(exc.format_message())}", err=True)
        return EXIT_USAGE
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("hermes: interrupted", err=True)
        return 130
    except EstopError as exc:
        typer.echo(f"hermes: error: {one_line(str(exc))}", err=True)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except Exception as exc:  # one line, never a traceback; HERMES_DEBUG=1 shows it
        if os.environ.get("HERMES_DEBUG"):
            raise
        typer.echo(f"hermes: internal error: {type(exc).__name__}: {one_line(str(exc))}", err=True)
        return 70
    return result if isinstance(result, int) else 0
