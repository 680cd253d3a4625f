"""Placeholder: the windows commands are registered here."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the windows commands to `app`."""
