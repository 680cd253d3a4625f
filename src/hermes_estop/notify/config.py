"""The `[[notify]]` tables of `<root>/estop.toml`: where events about holds are sent.

    [[notify]]
    name = "ops-slack"
    type = "webhook"
    url = "https://hooks.example/estop"
    headers = { Authorization = "Bearer ..." }
    secret = "shared-secret"          # X-Hermes-Signature: sha256=<hex HMAC of the body>
    events = ["engage", "release", "expire", "stale"]
    scopes = ["fleet"]
    before = "15m"                    # and an `upcoming` notice 15 min before a window arms

    [[notify]]
    name = "pager"
    type = "command"
    argv = ["/usr/local/bin/page-ops", "--estop"]   # the event JSON on stdin; success = exit 0

A bad table is refused with ONE line naming the file, the table and the field
(`InvalidNotify`, exit 2 on the CLI), before anything is sent: a notifier that silently drops a
misspelt target is worse than one that refuses to start.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hermes_estop.model.durations import parse_ttl
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.text import printable, unsafe_char
from hermes_estop.process.fleet_config import CONFIG_FILE, read_config

__all__ = [
    "DEFAULT_STALE_AFTER",
    "EVENT_KINDS",
    "CommandTarget",
    "InvalidNotify",
    "Target",
    "WebhookTarget",
    "load_targets",
    "parse_targets",
]

#: every event a target may ask for: the audit trail's, and the stale-hold reminder
EVENT_KINDS = ("engage", "rearm", "release", "expire", "retire", "skip", "stale", "task-start", "task-end",
               "override", "refused")  # the last two: the arming policy (issue 37)
DEFAULT_STALE_AFTER = timedelta(hours=4)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_HEADER_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class InvalidNotify(EstopError, ValueError):
    """A `[[notify]]` table that does not validate; the message names file, table and field."""


def _seconds(value: object, what: str, *, maximum: float) -> float:
    """A positive number of seconds (int/float) or a duration string (`30s`, `5m`, `PT1M`)."""
    if isinstance(value, bool):
        raise ValueError(f"invalid {what} {value!r}: expected seconds or a duration such as 30s")  # noqa: TRY004 - pydantic reports ValueError
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_ttl(value).total_seconds()
    else:
        raise ValueError(f"invalid {what} {value!r}: expected seconds or a duration such as 30s")  # noqa: TRY004 - pydantic reports ValueError
    if not math.isfinite(seconds) or seconds <= 0 or seconds > maximum:
        raise ValueError(f"invalid {what} {value!r}: expected more than 0 and at most {maximum:g} seconds")
    return seconds


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    events: tuple[str, ...] = EVENT_KINDS
    scopes: tuple[str, ...] | None = None
    #: delivery attempt timeout, seconds
    timeout: float = 10.0
    #: first retry delay after a failure; doubles per failure up to `backoff_max`
    backoff_initial: float = 1.0
    backoff_max: float = 300.0
    #: remind about a hold without a deadman that has stood this long, and every as long again
    stale_after: timedelta = DEFAULT_STALE_AFTER
    #: where a target seen for the first time starts: the whole trail, or only what follows
    start: Literal["beginning", "end"] = "beginning"
    #: also send an `upcoming` notice this long before each window occurrence arms (None: never)
    before: timedelta | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.fullmatch(value):
            raise ValueError(f"invalid name {value!r}: letters, digits, '_', '.', '-' (at most 64)")
        return value

    @field_validator("events", mode="before")
    @classmethod
    def _events(cls, value: object) -> Any:
        if not isinstance(value, list) or not value:
            raise ValueError(f"invalid events {value!r}: expected a non-empty list of {', '.join(EVENT_KINDS)}")
        for item in value:
            if item not in EVENT_KINDS:
                raise ValueError(f"unknown event {item!r}: expected one of {', '.join(EVENT_KINDS)}")
        return tuple(dict.fromkeys(value))

    @field_validator("scopes", mode="before")
    @classmethod
    def _scopes(cls, value: object) -> Any:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            raise ValueError(f"invalid scopes {value!r}: expected a non-empty list of scope names")
        for item in value:
            if not isinstance(item, str) or not item or unsafe_char(item):
                raise ValueError(f"invalid scope {item!r}")
        return tuple(value)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> float:
        return _seconds(value, "timeout", maximum=300)

    @field_validator("backoff_initial", "backoff_max", mode="before")
    @classmethod
    def _backoff(cls, value: object) -> float:
        return _seconds(value, "backoff", maximum=86400)

    @field_validator("stale_after", mode="before")
    @classmethod
    def _stale_after(cls, value: object) -> timedelta:
        return timedelta(seconds=_seconds(value, "stale_after", maximum=366 * 86400))

    @field_validator("before", mode="before")
    @classmethod
    def _before(cls, value: object) -> timedelta | None:
        return None if value is None else timedelta(seconds=_seconds(value, "before", maximum=7 * 86400))

    def wants(self, event: str, scope: str | None) -> bool:
        """Whether this target asked for `event` at `scope` (a test event is always wanted)."""
        if event == "test":
            return True
        if event not in self.events:
            return False
        return self.scopes is None or scope in self.scopes

    def backoff(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures: capped exponential."""
        if failures <= 0:
            return 0.0
        return min(self.backoff_max, self.backoff_initial * 2.0 ** min(failures - 1, 60))


class WebhookTarget(_Common):
    """HTTP POST of one JSON event; success is a 2xx answer."""

    type: Literal["webhook"]
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    secret: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or unsafe_char(value):
            raise ValueError(f"invalid url {value!r}: expected an http:// or https:// URL")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not _HEADER_RE.fullmatch(key):
                raise ValueError(f"invalid header name {key!r}")
            if unsafe_char(item):
                raise ValueError(f"invalid value for header {key!r}: control characters are not allowed")
        return value

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("invalid secret: empty")
        return value

    def describe(self) -> str:
        parts = urlsplit(self.url)
        return f"webhook {parts.scheme}://{parts.netloc}{parts.path}"  # never the query (tokens)


class CommandTarget(_Common):
    """A command run with the event JSON on stdin; success is exit status 0."""

    type: Literal["command"]
    argv: tuple[str, ...]

    @field_validator("argv", mode="before")
    @classmethod
    def _argv(cls, value: object) -> Any:
        if not isinstance(value, list) or not value or not all(isinstance(a, str) and a for a in value):
            raise ValueError(f"invalid argv {value!r}: expected a non-empty list of strings")
        if any("\x00" in a for a in value):
            raise ValueError("invalid argv: NUL byte")
        return tuple(value)

    def describe(self) -> str:
        return f"command {printable(' '.join(self.argv))}"


Target = Annotated[WebhookTarget | CommandTarget, Field(discriminator="type")]


class _Document(BaseModel):
    model_config = ConfigDict(extra="ignore")
    notify: list[Target] = Field(default_factory=list)


def _table_label(tables: list[Any], index: int) -> str:
    label = f"[[notify]] #{index + 1}"
    table = tables[index] if 0 <= index < len(tables) else None
    if isinstance(table, dict) and isinstance(table.get("name"), str):
        label += f" ({printable(table['name'])})"
    return label


def parse_targets(data: dict[str, Any], path: Path) -> list[WebhookTarget | CommandTarget]:
    """The targets of a parsed `estop.toml`; `InvalidNotify` naming file, table and field."""
    tables = data.get("notify", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise InvalidNotify(f"{printable(path)}: 'notify' must be an array of tables ([[notify]])")
    for index, table in enumerate(tables):
        if table.get("type") not in ("webhook", "command"):
            raise InvalidNotify(f"{printable(path)}: {_table_label(tables, index)}: field 'type': "
                                f"expected \"webhook\" or \"command\", not {printable(repr(table.get('type')))}")
    try:
        targets = _Document.model_validate({"notify": tables}).notify
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = [part for part in error["loc"] if part not in ("notify",)]
        index = loc[0] if loc and isinstance(loc[0], int) else -1
        fields = [str(p) for p in loc[1:] if p not in ("webhook", "command")]
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (known: " + ", ".join(sorted(set(WebhookTarget.model_fields)
                                                                  | set(CommandTarget.model_fields))) + ")"
        where = f"{printable(path)}: {_table_label(tables, index)}"
        if fields:
            where += f": field {printable(repr('.'.join(fields)))}"
        raise InvalidNotify(f"{where}: {' '.join(printable(message).split())}") from None
    seen: set[str] = set()
    for index, target in enumerate(targets):
        if target.name in seen:
            raise InvalidNotify(f"{printable(path)}: {_table_label(tables, index)}: field 'name': "
                                f"duplicate name {target.name!r}")
        seen.add(target.name)
    return list(targets)


def load_targets(root: Path) -> list[WebhookTarget | CommandTarget]:
    """The notify targets of fleet root `root` (none without `estop.toml`). `InvalidNotify` or
    `InvalidArgument` (one line naming the file) when the file cannot be read or is invalid.
    Read with `fsutil.read_regular`: never blocks on a FIFO."""
    path = root / CONFIG_FILE
    try:
        data = read_config(path)
    except InvalidArgument as exc:
        raise InvalidNotify(str(exc)) from None
    if data is None:
        return []
    return parse_targets(data, path)
