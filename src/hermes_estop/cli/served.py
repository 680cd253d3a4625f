"""Whether this command speaks to a server (`--server` / $HERMES_ESTOP_SERVER), asked without
importing the remote client when no server is named: `hermes check`, `gate` and `history`
run from crontab lines and stay cheap."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this module stays cheap to import
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from hermes_estop.cli.api_client import Remote

__all__ = ["SERVED", "SERVER_ENV", "TOKEN_FILE_ENV", "named_server", "named_token_file", "remote_if_named",
           "served_environment", "unserved", "use_server"]

SERVER_ENV = "HERMES_ESTOP_SERVER"
TOKEN_FILE_ENV = "HERMES_ESTOP_TOKEN_FILE"  # noqa: S105 - the name of an environment variable, not a secret
_CHOSEN: dict[str, str | None] = {}


#: the commands `--server` serves (the words after `hermes`); every other command is refused
#: with one line while a server is named: it would act on this host's files, not the server's fleet
SERVED = frozenset({("pause",), ("resume",), ("status",), ("check",), ("gate",), ("history",), ("help",), ("run",),
                    ("windows", "list"), ("windows", "next"), ("windows", "skip"), ("windows", "unskip")})
#: the command groups: alone (`hermes windows`) they print their help, which acts on nothing
_GROUPS = frozenset({"windows", "cron", "kanban", "gateway", "store", "notify", "tokens", "policy"})
#: the root options that take a value (`hermes --server URL pause`)
_ROOT_VALUED = ("--store", "--server", "--token-file")


def unserved(args: Sequence[str]) -> str | None:
    """The one line refusing `hermes ARGS` while a server is named (`--server` among the root
    options, or $HERMES_ESTOP_SERVER) and the command is not one `--server` serves; None
    otherwise (no server, a served command, or help and the version, which act on nothing)."""
    server, words, rest = os.environ.get(SERVER_ENV) or None, list[str](), list(args)
    while rest and len(words) < 2:
        head = rest.pop(0)
        if head in ("-h", "--help", "--version"):
            return None
        name, eq, value = head.partition("=")
        if not words and name in _ROOT_VALUED:
            value = value if eq else (rest.pop(0) if rest else "")
            server = value or server if name == "--server" else server
        elif head == "--":
            if words:
                break  # the command's own arguments follow
            # `hermes -- drain ...`: the command still follows (click takes the word after `--`)
        elif not head.startswith("-"):
            words.append(head)
        elif words:
            break  # a command's own option: the words so far name it
    if server is None or not words or any(tuple(words[:n]) in SERVED for n in (1, 2)):
        return None
    if words == words[:1] and words[0] in _GROUPS and not rest:
        return None
    if any(flag in rest for flag in ("-h", "--help")):
        return None
    command = " ".join(words if words[0] in _GROUPS else words[:1])
    return (f"hermes {command} is not served over --server ({server}): it would act on this host's files, not "
            f"the server's fleet; run it on a host of the fleet, or unset {SERVER_ENV} / drop --server")


def use_server(url: str | None, token_file: str | None) -> None:
    """Record `--server` / `--token-file` from the command line (they win over the environment)."""
    _CHOSEN.update(server=url, token_file=token_file)


def named_server() -> str | None:
    """The URL `--server` / $HERMES_ESTOP_SERVER names (None: this host's store)."""
    return _CHOSEN.get("server") or os.environ.get(SERVER_ENV) or None


def named_token_file() -> str | None:
    """The token file `--token-file` / $HERMES_ESTOP_TOKEN_FILE names."""
    return _CHOSEN.get("token_file") or os.environ.get(TOKEN_FILE_ENV) or None


def served_environment() -> dict[str, str]:
    """What a process this command starts needs to speak to the same server (`hermes run`'s job:
    a `hermes check` inside it reads the served fleet): the server and the token file's path,
    never the token itself."""
    found = {SERVER_ENV: named_server(), TOKEN_FILE_ENV: named_token_file()}
    return {name: value for name, value in found.items() if value}


def remote_if_named() -> Remote | None:
    """The server `--server` / $HERMES_ESTOP_SERVER names, or None (this host's store); a bad
    URL or token file is `InvalidArgument` naming it. The remote client is imported only when
    a server is named: `hermes check`, `gate` and `history` run from crontab lines and stay cheap."""
    url = named_server()
    if url is None:
        return None
    from hermes_estop.model.errors import InvalidArgument

    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(f"invalid --server {url!r}: expected http(s)://HOST:PORT")
    token_file = named_token_file()
    if not token_file:
        raise InvalidArgument(f"--server {url} needs a token: --token-file PATH or ${TOKEN_FILE_ENV}")
    try:
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read --token-file {token_file}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token:
        raise InvalidArgument(f"--token-file {token_file} is empty")
    from hermes_estop.cli.api_client import Remote

    return Remote(url.rstrip("/"), token)
