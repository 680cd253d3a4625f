"""The CLI reference page, generated from the Typer app at build time (never hand-copied).

`mkdocs build` calls `on_page_markdown` for every page; on the page that carries the marker
below, the marker is replaced by one section per command of `hermes`, in the order the app
lists them, each with the command's own `--help` text. tests/test_docs_site.py compares the
sections with the app's command tree, so the reference cannot miss a command."""

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


def _walk(root: Any) -> Iterator[tuple[tuple[str, ...], Any, Any]]:
    """(path, command, its help context) of `hermes` and every visible sub-command, in the order
    the app lists them (the app's own walk of its command tree)."""
    from hermes_estop.cli.application import _walk as walk_app

    contexts = {(): root.make_context("hermes", [], resilient_parsing=True,
                                      terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)}
    for path, command in walk_app(root):
        if path:
            parent = contexts.get(path[:-1])
            if parent is None or getattr(command, "hidden", False):
                continue
            contexts[path] = command.make_context(path[-1], [], parent=parent, resilient_parsing=True)
        yield path, command, contexts[path]


def reference_markdown() -> str:
    """One section per command (`hermes` itself first), its `--help` in a text block."""
    parts = []
    for path, command, ctx in _walk(_app_command()):
        level = "#" * (len(path) + 1 if path else 2)
        name = " ".join(("hermes", *path))
        parts.append(f"{level} {name}\n\n```text\n{command.get_help(ctx).rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_markdown())
