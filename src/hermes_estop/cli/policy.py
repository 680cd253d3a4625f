"""`hermes policy show|set|check`: the fleet's arming policy (issue 37)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from hermes_estop.cli.command_io import current_estop, emit_json, new_app, printable
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.policy import parse_policy, policy_document
from hermes_estop.process.fleet_config import read_config

__all__ = ["register"]


def _toml_lines(table: dict[str, Any], prefix: str = "policy") -> list[str]:
    plain = [f"{key} = {json.dumps(value)}" for key, value in table.items() if not isinstance(value, dict)]
    lines = [f"[{prefix}]", *plain]
    for key, value in table.items():
        if isinstance(value, dict):
            lines += ["", *_toml_lines(value, f"{prefix}.{json.dumps(key) if not key.isidentifier() else key}")]
    return lines


def show(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Print the policy every write of this fleet meets, and where it is kept."""
    estop = current_estop()
    policy, where = estop.fleet.load_policy()
    document = policy_document(policy)
    if as_json:
        emit_json({"source": where, "policy": document})
        return
    typer.echo(f"# from {printable(where)}" + ("" if document else " (no policy: every write allowed)"))
    typer.echo("\n".join(printable(line) for line in _toml_lines(document)))


def _read_table(path: Path) -> dict[str, Any]:
    data = read_config(path)
    if data is None:
        raise InvalidArgument(f"invalid policy file {printable(path)}: no such file")
    table = data.get("policy", {})
    if not isinstance(table, dict):
        raise InvalidArgument(f"invalid policy in {printable(path)}: policy: must be a table")
    return table


def check(path: Annotated[Path | None, typer.Argument(help="A TOML file with a [policy] table (default: the fleet's).")] = None) -> None:
    """Validate a policy (exit 2 naming the first unknown key or bad value)."""
    if path is None:
        estop = current_estop()
        _policy, where = estop.fleet.load_policy()
    else:
        parse_policy(_read_table(path), str(path))
        where = str(path)
    typer.echo(f"{printable(where)}: the policy is valid")


def set_(path: Annotated[Path, typer.Argument(help="A TOML file with the [policy] table to store.")]) -> None:
    """Store the policy in a shared store (PostgreSQL), where every host enforces it; the file
    store keeps it in estop.toml."""
    table = _read_table(path)
    policy = parse_policy(table, str(path))
    estop = current_estop()
    estop.fleet.keep_policy(policy_document(policy))
    estop.fleet.record("policy", estop.fleet.fleet_location, detail=f"policy set from {path}")
    typer.echo(f"stored the policy of {printable(path)} in the {estop.fleet.store_name} store")


def register(app: typer.Typer) -> None:
    """Add the policy commands to `app`."""
    policy_app = new_app("policy", "The fleet's arming policy: limits on every hold, enforced at every write.")
    policy_app.command("show")(show)
    policy_app.command("set")(set_)
    policy_app.command("check")(check)
    app.add_typer(policy_app, name="policy")
