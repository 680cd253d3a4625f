"""`hermes check`, `hermes gate` and `hermes history` without the CLI framework.

`check` and `gate` run from crontab lines and systemd timers, where the start-up cost is paid on
every run, and building the Typer app (which, from typer 0.29, also builds a pydantic adapter
per option) costs several times the check itself; `history --limit N` reads only the end of the
trail, so the app was most of its cost too. `cli.main` therefore sends a well-formed invocation
of any of them straight here (`history` runs in `cli.history`); anything else (`--help`, an
unknown or malformed option) goes to the Typer app, which prints the canonical help and errors.
The Typer commands call the same `run_check` / `run_gate` / `run_history`, so both paths behave
alike.
"""

from __future__ import annotations

import os
import sys

from hermes_estop.cli.exits import EXIT_HELD, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, GATE_HELD_EXIT
from hermes_estop.cli.served import remote_if_named
from hermes_estop.model.errors import InvalidArgument
from hermes_estop.model.text import printable
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import check_store_option, use_store

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this module stays cheap to import
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from hermes_estop.process.check import Verdict

__all__ = [
    "EXIT_HELD",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "GATE_HELD_EXIT",
    "HISTORY_MAX",
    "run_check",
    "run_gate",
    "try_hot_path",
]

#: `hermes history --limit N` takes at most this many (a number from input is bounded before use)
HISTORY_MAX = 1_000_000


def _verdict(user: str | None, profile: str | None, component: str | None = None, job: str | None = None) -> Verdict:
    """The consumers' verdict for (user, profile) on this host's fleet (`Estop.asked`: seen from
    `--profile`, every value validated as writes validate them); `component` and `job` say what
    the work is, for scoped holds (issue 26)."""
    return Estop().asked(user, profile, component, job)


def run_check(user: str | None, profile: str | None, *, quiet: bool = False, as_json: bool = False,
              component: str | None = None, job: str | None = None) -> int:
    """Exit code 0 when work may proceed, 1 when held; prints one line (or JSON) unless quiet.
    The printed line is escaped (`printable`: a reason is whatever a body says); `--json`
    carries the exact `reason` beside the (escaped) `notice`."""
    remote = remote_if_named()
    if remote is not None:
        from hermes_estop.cli.api_client import remote_check

        answer = remote_check(remote, user, profile, component, job)
        document, line, proceed = answer["document"], answer["line"], answer["proceed"]
    else:
        verdict = _verdict(user, profile, component, job)
        document, line, proceed = verdict.to_json(component is not None or job is not None), verdict.line, verdict.proceed
    if as_json:
        import json

        print(json.dumps(document, indent=2))
    elif not quiet:
        print(line)
    return EXIT_OK if proceed else EXIT_HELD


def run_gate(command: Sequence[str], user: str | None, profile: str | None, held_exit: int = GATE_HELD_EXIT,
             component: str | None = None, job: str | None = None) -> int:
    """Exec `command` when work may proceed; else print one line on stderr and return `held_exit`.
    Returns 127 (one line) when the command cannot be found."""
    if not command:
        raise InvalidArgument("no command given: use hermes gate [OPTIONS] -- CMD [ARGS...]")
    if not 0 <= held_exit <= 255:  # 0: a crontab or unit that treats a held skip as success
        raise InvalidArgument(f"invalid --held-exit {held_exit}: expected 0 to 255")
    executable = _which(command[0])
    if executable is None:
        print(f"hermes: error: command not found: {printable(repr(command[0]))}", file=sys.stderr)
        return EXIT_NOT_FOUND
    remote = remote_if_named()
    if remote is not None:
        from hermes_estop.cli.api_client import remote_check

        answer = remote_check(remote, user, profile, component, job)
        proceed, held_by, notice = answer["proceed"], answer["held_by"], answer["document"]["notice"]
    else:
        verdict = _verdict(user, profile, component, job)
        proceed, held_by, notice = verdict.proceed, verdict.held_by, verdict.notice
    if not proceed:
        print(f"hermes gate: held by {held_by}, not running {printable(command[0])}: {printable(notice)}",
              file=sys.stderr)
        return held_exit
    sys.stdout.flush()
    from hermes_estop.process.fleet_config import child_environment

    os.execve(executable, list(command), child_environment())  # noqa: S606 - the operator's own argv, never a shell
    return 0  # not reached: execv replaced the process


def _which(name: str) -> str | None:
    """`shutil.which(name)` as it behaves on POSIX, without importing `shutil` (which imports
    `fnmatch`, `zlib`, `bz2` and `lzma`: a tenth of `hermes gate`'s start-up, for one PATH walk)."""

    def runnable(path: str) -> bool:
        return os.path.exists(path) and os.access(path, os.X_OK) and not os.path.isdir(path)

    if os.path.dirname(name):
        return name if runnable(name) else None
    search = os.environ.get("PATH")
    if search is None:
        try:
            search = os.confstr("CS_PATH") or os.defpath
        except (AttributeError, ValueError):
            search = os.defpath
    seen = set()
    for directory in search.split(os.pathsep) if search else ():
        if directory not in seen:
            seen.add(directory)
            candidate = os.path.join(directory, name)
            if runnable(candidate):
                return candidate
    return None


_VALUED = {"check": ("--user", "--profile", "--component", "--job"),
           "gate": ("--user", "--profile", "--held-exit", "--component", "--job"),
           "history": ("--limit", "-n", "--since")}
_FLAGS = {"check": {"--quiet": "quiet", "-q": "quiet", "--json": "json"}, "gate": {}, "history": {"--json": "json"}}


def _parse(args: list[str]) -> tuple[str, dict[str, object], list[str]] | None:
    """(command, options, rest) for a well-formed invocation, else None."""
    store = None
    while args and args[0].startswith("--store"):
        head = args.pop(0)
        if head == "--store" and args:
            store = args.pop(0)
        elif head.startswith("--store="):
            store = head.split("=", 1)[1]
        else:
            return None
    if not args or args[0] not in _VALUED:
        return None
    name, rest = args[0], args[1:]
    options: dict[str, object] = {"store": store}
    while rest:
        head = rest[0]
        if head == "--":
            rest = rest[1:]
            break
        if not head.startswith("-"):
            if name != "gate":
                return None
            break
        key, eq, value = head.partition("=")
        if key in _VALUED[name]:
            if not eq:
                if len(rest) < 2:
                    return None
                value = rest[1]
                rest = rest[2:]
            else:
                rest = rest[1:]
            options[key.lstrip("-").replace("-", "_")] = value
        elif not eq and head in _FLAGS[name]:
            options[_FLAGS[name][head]] = True
            rest = rest[1:]
        else:
            return None
    if name != "gate" and rest:
        return None
    return name, options, rest


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def try_hot_path(args: Sequence[str]) -> int | None:
    """The exit code of a well-formed `check` / `gate` / `history` invocation, run without Typer; None when
    `args` is anything else (the caller hands it to the full app)."""
    parsed = _parse(list(args))
    if parsed is None:
        return None
    name, options, rest = parsed
    held_exit = GATE_HELD_EXIT
    if "held_exit" in options:
        try:
            held_exit = int(str(options["held_exit"]))
        except ValueError:
            return None
    limit = 50
    if name == "history":
        text = options.get("limit", options.get("n", "50"))
        if not str(text).isdigit() or len(str(text)) > len(str(HISTORY_MAX)) or not 1 <= int(str(text)) <= HISTORY_MAX \
                or ("limit" in options and "n" in options):
            return None  # the Typer app words the refusal
        limit = int(str(text))
    if options["store"] is not None:
        use_store(check_store_option(str(options["store"])))
    if name == "history":
        from hermes_estop.cli.history import run_history

        return run_history(limit, _text(options.get("since")), bool(options.get("json")))
    user, profile = _text(options.get("user")), _text(options.get("profile"))
    component, job = _text(options.get("component")), _text(options.get("job"))
    if name == "check":
        return run_check(user, profile, quiet=bool(options.get("quiet")), as_json=bool(options.get("json")),
                         component=component, job=job)
    return run_gate(rest, user, profile, held_exit, component, job)
