"""The CLI reference page, generated from the Typer app at build time (never hand-copied).

`mkdocs build` calls `on_page_markdown` for every page; on the page that carries the marker
below, the marker is replaced by one section per command of `hermes`, in the order the app
lists them, each with the command's own `--help` text. `commands()` is what the tests compare
with the app, so the reference cannot miss a command."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MARKER = "<!-- hermes-cli-reference -->"
#: the width the help text is wrapped at on the page
HELP_WIDTH = 80


def _app_command() -> Any:
    import typer

    from hermes_estop.cli.application import _finish, build_app

    return _finish(typer.main.get_command(build_app()))


def _walk(command: Any, ctx: Any) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """(path, command, its context) of `command` and every visible sub-command, depth first."""
    yield tuple(ctx.command_path.split()[1:]), command, ctx
    subcommands = getattr(command, "commands", None)
    if not isinstance(subcommands, dict):
        return
    for name in command.list_commands(ctx):
        sub = subcommands[name]
        if getattr(sub, "hidden", False):
            continue
        sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        yield from _walk(sub, sub_ctx)


def _root_context(command: Any) -> Any:
    return command.make_context("hermes", [], resilient_parsing=True,
                                terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)


def commands() -> list[tuple[str, ...]]:
    """Every command path of the app (`()` is `hermes` itself, `("windows", "add")` ...)."""
    root = _app_command()
    return [path for path, _, _ in _walk(root, _root_context(root))]


def reference_markdown() -> str:
    """One section per command (`hermes` itself first), its `--help` in a text block."""
    root = _app_command()
    parts = []
    for path, command, ctx in _walk(root, _root_context(root)):
        level = "#" * (len(path) + 1 if path else 2)
        name = " ".join(("hermes", *path))
        parts.append(f"{level} {name}\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_markdown())
