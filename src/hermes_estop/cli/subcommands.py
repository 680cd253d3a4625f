"""Registration of the sub-commands that live outside the core: windows and `serve`, the
consumers, the store, `run`, and `demo`. Each module registers its own commands."""

from __future__ import annotations

from importlib import import_module

import typer

__all__ = ["MODULES", "OWNERS", "register"]

#: the modules that register sub-commands, in the order the help lists them
MODULES = ("windows", "serve", "cron_kanban_gateway", "consumers", "doctor", "store", "demo", "notify", "run", "tokens",
           "policy")
#: the module that registers each top-level command: `hermes windows next` builds the windows
#: group alone (building every sub-command's click tree cost each command about 30 ms);
#: tests/cli/test_subcommands.py checks it against what each module registers
OWNERS = {"windows": "windows", "serve": "serve", "drain": "cron_kanban_gateway", "cron": "cron_kanban_gateway", "kanban": "cron_kanban_gateway",
          "gateway": "cron_kanban_gateway", "consumers": "consumers", "doctor": "doctor", "store": "store", "demo": "demo",
          "notify": "notify", "run": "run", "tokens": "tokens", "policy": "policy"}


def register(app: typer.Typer, command: str | None = None) -> None:
    """Every module's commands on `app`, or only those of the module owning `command` (an
    unknown one registers them all, so the error names the commands there are)."""
    owner = OWNERS.get(command) if command is not None else None
    for name in (owner,) if owner is not None else MODULES:
        import_module(f"{__package__}.{name}").register(app)
