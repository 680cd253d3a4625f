"""The store URL of the PostgreSQL backend: a libpq URL plus two parameters of ours, removed
before it reaches libpq: `schema` (default `hermes_estop`) and `grace` (seconds, default 5), e.g.
`postgresql://estop@db.internal/fleet?schema=hermes_estop&grace=5`. Passwords never reach
anything printed (`StoreURL.display`)."""

from __future__ import annotations

from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from hermes_estop.model.errors import InvalidArgument, StoreError, StoreRefused, StoreUnavailable
from hermes_estop.model.text import one_line
from hermes_estop.stores.pg_cache import DEFAULT_GRACE, PASSWORD_HINT, authentication_failed
from hermes_estop.stores.pg_schema import DEFAULT_SCHEMA, validate_schema_name

__all__ = ["StoreURL", "connect_error", "parse_store_url"]

_OUR_PARAMS = ("schema", "grace")
_MAX_GRACE = 300.0
_DEFAULT_CONNECT_TIMEOUT = 5


class StoreURL:
    """A parsed store URL: the conninfo for libpq, our parameters, and a printable form."""

    def __init__(self, conninfo: str, schema: str, grace: float, display: str, connect_timeout: float) -> None:
        self.conninfo = conninfo
        self.schema = schema
        self.grace = grace
        self.display = display
        self.connect_timeout = connect_timeout


def _redact(parts: SplitResult) -> str:
    netloc = parts.netloc
    if "@" in netloc:
        creds, host = netloc.rsplit("@", 1)
        if ":" in creds:
            netloc = f"{creds.split(':', 1)[0]}:***@{host}"
    query = "&".join(
        f"{key}=***" if key == "password" else f"{key}={value}" for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return str(urlunsplit((parts.scheme, netloc, parts.path, query, "")))


def parse_store_url(url: str) -> StoreURL:
    """Split our parameters off a `postgresql://` URL; `InvalidArgument` names a bad value."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidArgument(f"invalid store URL {url!r}: {exc}") from None
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArgument(f"invalid store URL {url!r}: expected postgresql://")
    params = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in params if key in _OUR_PARAMS}
    rest = [(key, value) for key, value in params if key not in _OUR_PARAMS]
    schema = validate_schema_name(ours.get("schema", DEFAULT_SCHEMA))
    raw_grace = ours.get("grace")
    grace = DEFAULT_GRACE
    if raw_grace is not None:
        try:
            grace = float(raw_grace)
        except ValueError:
            grace = -1.0
        if not 0 < grace <= _MAX_GRACE:
            raise InvalidArgument(f"invalid grace {raw_grace!r} in the store URL: expected seconds, above 0 and at most {_MAX_GRACE:g}")
    connect_timeout: float = _DEFAULT_CONNECT_TIMEOUT
    if not any(key == "connect_timeout" for key, _ in rest):
        rest.append(("connect_timeout", str(_DEFAULT_CONNECT_TIMEOUT)))
    else:
        try:
            connect_timeout = float(dict(rest)["connect_timeout"])
        except ValueError:
            raise InvalidArgument(f"invalid connect_timeout {dict(rest)['connect_timeout']!r} in the store URL") from None
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), ""))
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"invalid store URL {_redact(parts)!r}: {one_line(exc)}") from None
    return StoreURL(conninfo, schema, grace, _redact(parts), connect_timeout)


def connect_error(url: StoreURL, exc: BaseException) -> StoreError:
    """The error of a failed connection to `url`: `StoreRefused` naming where a password goes
    when the server refused the authentication, else `StoreUnavailable`."""
    if authentication_failed(exc):
        return StoreRefused(f"the PostgreSQL store {url.display} refused this role: authentication failed "
                            f"({one_line(exc)}); {PASSWORD_HINT}")
    return StoreUnavailable(f"cannot reach the PostgreSQL store {url.display}: {one_line(exc)}")
