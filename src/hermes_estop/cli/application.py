"""The Typer app behind `hermes`: every command, with help. `cli.main` runs it.

Three things are applied here to the whole command tree, so every command module gets them
without repeating them: metavars that read as words (`ID`, `NAME`, `DUR`, not `<str>`), shell
completion of window and cron job names, and the normal multi-line help for a bare group
(`hermes`, `hermes windows`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any

import typer

try:  # typer >= 0.29 vendors its own (reduced) click; older releases use the click package
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import NoArgsIsHelpError, UsageError  # type: ignore[import-not-found,no-redef,assignment,unused-ignore]

from hermes_estop import __version__
from hermes_estop.cli import hold
from hermes_estop.cli.command_io import EXIT_USAGE, new_app, one_line
from hermes_estop.cli.served import unserved, use_server
from hermes_estop.model.homes import resolve_layout
from hermes_estop.process.estop import Estop
from hermes_estop.process.fleet_config import STORE_ENV, check_store_option, use_store

# The command tree is walked by duck typing: typer's vendored click has no `Group` / `Option`
# classes to test against (typer's own `TyperGroup` / `TyperOption` stand in for them).
Command = Any
Parameter = Any

__all__ = ["COMPLETE_ENV", "CORE_COMMANDS", "METAVARS", "build_app", "run_app"]

#: The hold commands, served by the core app alone: they run from crontab and systemd timer
#: lines, so their start-up must not pay for building every other sub-command.
CORE_COMMANDS = frozenset({"pause", "resume", "status", "check", "gate", "history"})

#: the variable a shell's completion script sets when it asks `hermes` for completions
COMPLETE_ENV = "_HERMES_COMPLETE"

#: The word shown for an option's value, by option name (`--ttl DUR`, not `--ttl <str>`).
METAVARS = {
    "--store": "URL", "--user": "ID", "--allow-user": "ID", "--owner": "ID", "--generation": "ID",
    "--profile": "NAME", "--allow-profile": "NAME", "--window": "NAME",
    "--ttl": "DUR", "--duration": "DUR", "--timeout": "DUR", "--terminate-after": "DUR", "--for": "DUR",
    "--drain": "DUR", "--grace": "DUR",
    "--until": "TIME", "--at": "TIME", "--not-before": "TIME", "--not-after": "TIME", "--on": "DATE",
    "--occurrence": "TIME",
    "--reason": "TEXT", "--held-exit": "CODE", "--limit": "N", "--count": "N", "--days": "N",
    "--cron": "EXPR", "--tz": "ZONE", "--dir": "DIR", "--http": "ADDR", "--listen": "ADDR",
    "--command": "CMD", "--operator": "ID",
}
#: the word shown for a positional argument, where its upper-cased name is not the word
_ARGUMENT_WORDS = {"command": "CMD", "card_id": "ID"}
# a value's word by click type name, for an option METAVARS does not list
_TYPE_WORDS = {"int": "N", "integer": "N", "float": "SECONDS", "path": "PATH", "Path": "PATH"}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hermes-estop {__version__}")
        raise typer.Exit(0)


def _root(
    store: Annotated[str | None, typer.Option("--store", metavar="URL",
                                              help=f"Store URL (file, postgresql://...); default ${STORE_ENV}.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
    server: Annotated[str | None, typer.Option("--server", metavar="URL",
                                               help="Run pause, resume, status, check, gate, history, run and windows list/next/skip/unskip against this server's write API (every other command is refused); default $HERMES_ESTOP_SERVER.")] = None,
    token_file: Annotated[str | None, typer.Option("--token-file", metavar="PATH",
                                                   help="The bearer token for --server; default $HERMES_ESTOP_TOKEN_FILE.")] = None,
) -> None:
    if store is not None:
        use_store(check_store_option(store))
    if server is not None or token_file is not None:
        use_server(server, token_file)


def build_app(*, extensions: bool = True, command: str | None = None) -> typer.Typer:
    """The `hermes` app; without `extensions`, only the hold commands (with `command`, that one
    alone: Typer inspects every command it is given, and `hermes pause` runs one); with
    `command`, the hold commands and that extension command alone (`subcommands.OWNERS`)."""
    built = new_app("hermes", "Stop all NEW work in an agent fleet for maintenance, and get it back reliably.\n\n"
                    "`hermes help COMMAND` (or `hermes COMMAND -h`) explains a command.",
                    completion=True)
    built.callback()(_root)
    alone = command if not extensions else None
    hold.register(built, alone)
    if alone is None:
        built.command("help", hidden=True)(_help)  # listed by the manual; `--help` is what the list offers
    if extensions:
        from hermes_estop.cli.subcommands import register  # the other commands: not for `hermes pause` (issue 45)

        register(built, command)
    return built


# -- applied to the built command tree ---------------------------------------------------------

def _walk(command: Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Command]]:
    yield path, command
    subcommands = getattr(command, "commands", None)
    if isinstance(subcommands, dict):
        for name, sub in subcommands.items():
            yield from _walk(sub, (*path, name))


def _metavar(param: Parameter) -> str:
    long_names = [opt for opt in param.opts if opt.startswith("--")]
    for name in long_names:
        if name in METAVARS:
            return METAVARS[name]
    bare_type = getattr(param, "bare_type", None)  # typer's options; click's carry `type.name`
    type_name = bare_type() if callable(bare_type) else getattr(getattr(param, "type", None), "name", "")
    word = _TYPE_WORDS.get(str(type_name), "")
    if word:
        return word
    return (param.name or "value").upper().replace("_", "-")


def _window_names(ctx: Any, param: Parameter, incomplete: str) -> list[str]:
    """Window names from this fleet's windows.toml (nothing when it cannot be read)."""
    from hermes_estop.windows.windows_file import WindowsFile  # completion only: not for every command (issue 45)

    try:
        names = [window.name for window in WindowsFile(resolve_layout().root).load()]
    except Exception:  # noqa: BLE001 - completion offers nothing rather than a traceback
        return []
    return sorted(name for name in names if name.startswith(incomplete))


def _job_names(ctx: Any, param: Parameter, incomplete: str) -> list[str]:
    """Cron job names from this home's job table (nothing when it cannot be read)."""
    from hermes_estop.consumers.cron import CronTable  # completion only: not for every command (issue 45)

    try:
        names = [job.name for job in CronTable.of(Estop()).jobs()]
    except Exception:  # noqa: BLE001 - completion offers nothing rather than a traceback
        return []
    return sorted(name for name in names if name.startswith(incomplete))


#: (command path, parameter name) -> what completes it
_COMPLETERS: dict[tuple[tuple[str, ...], str], Callable[[Any, Parameter, str], list[str]]] = {
    (("windows", "remove"), "name"): _window_names,
    (("windows", "next"), "name"): _window_names,
    (("windows", "skip"), "name"): _window_names,
    (("windows", "unskip"), "name"): _window_names,
    (("windows", "explain"), "name"): _window_names,
    (("cron", "remove"), "name"): _job_names,
    (("cron", "run"), "name"): _job_names,
}


def _no_type(ctx: Any) -> None:
    return None


def _finish(command: Command) -> Command:
    """Word metavars on every option that takes a value, and the name completers."""
    for path, cmd in _walk(command):
        for param in cmd.params:
            if param.param_type_name == "option" and not param.is_flag and not param.count:
                current = param.metavar
                if current is None or current.startswith("<"):
                    param.metavar = _metavar(param)
            elif param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
                # typer lists an argument as `NAME <str>`: its name already is the word
                param.display_type_rich = _no_type
                if param.metavar is None:
                    param.metavar = _ARGUMENT_WORDS.get(param.name or "", (param.name or "value").upper())
                param.get_usage_pieces = _usage_pieces(param)
            completer = _COMPLETERS.get((path, param.name or ""))
            if completer is not None:
                param._custom_shell_complete = completer  # noqa: SLF001 - click has no public setter for a completer
        if path and not getattr(cmd, "hidden", False):
            cmd.short_help = summary(cmd.help or "")
    return command


def summary(help_text: str) -> str:
    """A command's line in its group's list: the first sentence of its help, whole (click cuts
    it at 45 characters, mid-sentence)."""
    paragraph = " ".join(help_text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph[: end + 1] if end >= 0 else paragraph


def _usage_pieces(param: Parameter) -> Callable[[Any], list[str]]:
    """An argument in the usage line as `NAME` (required) or `[NAME]`; typer writes `{NAME}`."""
    word = param.metavar or (param.name or "value").upper()
    piece = word if param.required else f"[{word}]"
    if param.nargs != 1:
        piece += "..."
    return lambda ctx: [piece]


def _command_name(args: Sequence[str]) -> str | None:
    """The sub-command an argument list invokes (skipping the root options)."""
    rest = list(args)
    while rest:
        head = rest.pop(0)
        if head == "--store":
            rest = rest[1:]
        elif not head.startswith("-"):
            return head
    return None


def _sub_command(command_path: str) -> str:
    """`windows: ` for an error inside `hermes windows`, nothing at the root: the line already
    starts `hermes: error:`, and said `hermes: error: hermes: No such command` (issue 38)."""
    words = command_path.split()[1:]
    return f"{' '.join(words)}: " if words else ""


def _help(command: Annotated[list[str] | None, typer.Argument(help="The command (and sub-command) to explain.")] = None) -> None:
    """Show the help of COMMAND (`hermes help windows add`), or of `hermes` itself."""
    raise typer.Exit(run_app([*(command or []), "--help"]))


def run_app(args: list[str]) -> int:
    """Run `args` through the Typer app (a hold command's app holds that command alone: it is
    all such a run needs), mapping the framework's usage errors to one line and exit 2. A bare group
    (`hermes`, `hermes windows`) prints its normal help on stdout and exits 0."""
    refusal = unserved(args)
    if refusal is not None:
        typer.echo(f"hermes: error: {one_line(refusal)}", err=True)
        return EXIT_USAGE
    name = _command_name(args)
    completing = COMPLETE_ENV in os.environ
    full = name not in CORE_COMMANDS or completing
    command = _finish(typer.main.get_command(build_app(extensions=full, command=None if completing else name)))
    try:
        result = command.main(args=args, prog_name="hermes", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # a bare `hermes` (or group) asks what there is: not an error
        typer.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except UsageError as exc:
        where = _sub_command(exc.ctx.command_path) if exc.ctx is not None else ""
        typer.echo(f"hermes: error: {where}{one_line(exc.format_message())}", err=True)
        return EXIT_USAGE
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        raise KeyboardInterrupt from None
    return result if isinstance(result, int) else 0
