"""cli.subcommands: a command builds only the module that owns it, so OWNERS must name, for every
top-level command each module registers, that module (a command missing there would still run,
with every module built; one named wrongly would not run at all)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
import typer

from hermes_estop.cli import subcommands
from hermes_estop.cli.application import CORE_COMMANDS, build_app
from hermes_estop.cli.command_io import new_app


def registered(module: str) -> set[str]:
    app = new_app("probe", "probe")
    import_module(f"hermes_estop.cli.{module}").register(app)
    names = {command.name or command.callback.__name__ for command in app.registered_commands if command.callback}
    return names | {group.name or group.typer_instance.info.name for group in app.registered_groups}


@pytest.mark.parametrize("module", subcommands.MODULES)
def test_owners_names_every_command_of_each_module(module):
    assert registered(module) == {name for name, owner in subcommands.OWNERS.items() if owner == module}


@pytest.mark.parametrize("command", sorted(subcommands.OWNERS))
def test_a_command_builds_with_its_owner_alone(command):
    app = new_app("hermes", "probe")
    subcommands.register(app, command)
    built = typer.main.get_command(app)
    names = set(getattr(built, "commands", {})) or {built.name}
    assert command in names or len(names) == 1


@pytest.mark.parametrize("command", sorted(CORE_COMMANDS))
def test_a_hold_command_builds_alone_with_the_options_it_has_in_the_whole_app(command):
    """`hermes pause` builds `pause` alone (Typer inspects every command of the app it runs), and
    that command takes exactly the options and settings it has beside the others."""
    alone: dict[str, Any] = getattr(typer.main.get_command(build_app(extensions=False, command=command)), "commands", {})
    whole: dict[str, Any] = getattr(typer.main.get_command(build_app()), "commands", {})
    assert set(alone) == {command}
    mine, theirs = alone[command], whole[command]
    assert [p.opts for p in mine.params] == [p.opts for p in theirs.params]
    assert mine.context_settings == theirs.context_settings
