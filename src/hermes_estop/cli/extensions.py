"""Registration of the sub-commands that live outside the core: windows and `serve`, the
consumers, the store, `run`, and `demo`. Each module registers its own commands."""

from __future__ import annotations

import typer

from . import consumers, demo, doctor, notify, registry, run, serve, store, windows

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    windows.register(app)
    serve.register(app)
    consumers.register(app)
    registry.register(app)
    doctor.register(app)
    store.register(app)
    demo.register(app)
    notify.register(app)
    run.register(app)
