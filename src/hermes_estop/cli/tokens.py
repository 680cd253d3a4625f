"""`hermes tokens create | list | revoke`: the bearer tokens of the write API (`api.tokens`)."""

from __future__ import annotations

from typing import Annotated

import typer

from hermes_estop.api.tokens import TokenTable, check_name, check_role
from hermes_estop.cli.command_io import JsonOpt, current_estop, duration_option, emit_json, new_app, printable

__all__ = ["register"]

tokens_app = new_app("tokens", "Bearer tokens of the write API (hermes serve --http-write).")


@tokens_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Who acts with it (audited as token:NAME).")],
    role: Annotated[str, typer.Option("--role", help="viewer (reads), operator (arms, extends, skips; lifts what it armed), admin (lifts any hold).")] = "viewer",
    expires: Annotated[str | None, typer.Option("--expires", metavar="DUR", help="Valid for this long (90d, 12h); default: until revoked.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a token and print its secret, once: only its hash is kept."""
    check_name(name)
    check_role(role)
    lifetime = duration_option("--expires", expires) if expires is not None else None
    fleet = current_estop().fleet
    token, secret = TokenTable(fleet).create(name, role, lifetime, fleet.clock())
    if as_json:
        emit_json({**token.to_json(fleet.clock()), "secret": secret})
        return
    typer.echo(secret)
    typer.echo(f"token {printable(name)} ({role}) created; the secret above is shown once, store it now", err=True)


@tokens_app.command("list")
def list_tokens(as_json: JsonOpt = False) -> None:
    """Every token: name, role, state (valid, expired, revoked), dates. Never a secret or hash."""
    fleet = current_estop().fleet
    now = fleet.clock()
    tokens = [token.to_json(now) for token in TokenTable(fleet).tokens()]
    if as_json:
        emit_json({"tokens": tokens})
        return
    if not tokens:
        typer.echo("no tokens (hermes tokens create NAME --role operator)")
    for token in tokens:
        expires = f"  expires {token['expires_at']}" if token["expires_at"] else ""
        typer.echo(f"{printable(token['name']):<24} {token['role']:<9} {token['state']:<8} created {token['created_at']}{expires}")


@tokens_app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="The token.")], as_json: JsonOpt = False) -> None:
    """Revoke a token: every server refuses it from its next request."""
    fleet = current_estop().fleet
    token = TokenTable(fleet).revoke(name, fleet.clock())
    if as_json:
        emit_json(token.to_json(fleet.clock()))
        return
    typer.echo(f"token {printable(name)} revoked")


def register(app: typer.Typer) -> None:
    app.add_typer(tokens_app)
