"""The transport rules of `hermes serve --http` with the write API (issue 36 item 3), decided
before anything is bound: the write API is off unless `--http-write` is given and the fleet has
a valid token; on a non-loopback address it needs TLS (`--tls-cert`/`--tls-key`, the standard
`ssl` module) unless `--insecure-http` says otherwise, which every response then states."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from hermes_estop.api.routes import WriteApi
from hermes_estop.api.tokens import TokenTable
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.netaddr import is_loopback
from hermes_estop.process.fleet_config import CONFIG_FILE, read_config

if TYPE_CHECKING:
    from hermes_estop.api.routes import WriteApi
    from hermes_estop.process.estop import Estop

__all__ = ["check_transport", "configured_write", "tls_context", "write_api"]


def configured_write(root: Path) -> bool:
    """`write = true` under `[http]` of the fleet's `estop.toml`: `--http-write` without the flag.
    `InvalidArgument` naming the file for a value that is not true or false."""
    path = Path(root) / CONFIG_FILE
    section = (read_config(path) or {}).get("http", {})
    value = section.get("write", False) if isinstance(section, dict) else None
    if not isinstance(value, bool):
        raise InvalidArgument(f"invalid config {path}: [http] write must be true or false")
    return value


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server context (TLS 1.2 or later) for `cert` and `key`; `InvalidArgument` naming the
    file that does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"cannot load --tls-cert {cert} / --tls-key {key}: {exc}") from None
    return context


def check_transport(listen: tuple[str, int] | None, *, http_write: bool, tls_cert: str | None,
                    tls_key: str | None, insecure_http: bool) -> ssl.SSLContext | None:
    """The TLS context to serve with (None: plain HTTP), or `InvalidArgument` for flags that
    do not go together or a remote write API without TLS."""
    if listen is None:
        for flag, given in (("--http-write", http_write), ("--tls-cert", tls_cert), ("--tls-key", tls_key),
                            ("--insecure-http", insecure_http)):
            if given:
                raise InvalidArgument(f"{flag} needs --http ADDR:PORT")
        return None
    if (tls_cert is None) != (tls_key is None):
        raise InvalidArgument("give --tls-cert and --tls-key together")
    tls = tls_context(tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    if http_write and tls is None and not is_loopback(listen[0]) and not insecure_http:
        raise InvalidArgument(f"refusing --http-write on {listen[0]}, not a loopback address, without TLS: "
                              "give --tls-cert and --tls-key (or --insecure-http to send tokens in clear)")
    return tls


def write_api(estop: Estop, host: str, *, http_write: bool, tls: ssl.SSLContext | None) -> WriteApi:
    """The `/api/v1/` routes for `hermes serve`; `InvalidArgument` for `--http-write` on a fleet
    without a valid token (the API would refuse everyone: say so at start-up)."""
    if http_write and not TokenTable(estop.fleet).any_valid(estop.clock()):
        raise InvalidArgument("--http-write: the fleet has no valid token; create one first: "
                              "hermes tokens create NAME --role operator")
    insecure = http_write and tls is None and not is_loopback(host)
    return WriteApi(estop, lambda: {}, write=http_write, insecure=insecure)
