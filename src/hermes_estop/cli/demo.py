"""`hermes demo`: a window arming, the consumers holding, the operator's maintenance work running
through the hold, and everything resuming at the deadman, in about ten seconds."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from hermes_estop.cli.command_io import emit_json
from hermes_estop.daemon.demo_fleet import run_demo
from hermes_estop.model.errors import InvalidArgument

__all__ = ["register"]


def demo(
    directory: Annotated[Path | None, typer.Option("--dir", help="Build the demo fleet here (an empty or new directory) and keep it.")] = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the temporary fleet afterwards.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON at the end.")] = False,
) -> None:
    """Run the whole system on a temporary fleet; exit 0 when it behaved as it should."""
    if directory is not None:
        directory = directory.expanduser().resolve()
        if directory.exists() and any(directory.iterdir()):
            raise InvalidArgument(f"invalid --dir {str(directory)!r}: not empty (the demo builds a fleet from nothing)")
        directory.mkdir(parents=True, exist_ok=True)
        root, keep = directory, True
    else:
        root = Path(tempfile.mkdtemp(prefix="hermes-demo-"))
    try:
        result = run_demo(root, say=typer.echo)
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    if as_json:
        emit_json({"ok": result.ok, "root": str(root), "kept": keep,
                   "checks": [{"check": name, "ok": ok} for name, ok in result.checks]})
    else:
        typer.echo("")
        for name, ok in result.checks:
            typer.echo(f"  {'ok  ' if ok else 'FAIL'}  {name}")
        typer.echo(f"demo {'passed' if result.ok else 'FAILED'}" + (f"; the fleet is kept in {root}" if keep else ""))
    raise typer.Exit(0 if result.ok else 1)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
