"""What a new operator reads first (issue 23 item 8): a bare group's help on stdout with exit 0,
whole first sentences in command lists, usage lines without typer's braces, a history whose
columns line up, and windows.toml written as `[[windows]]` tables however many there are."""

from __future__ import annotations

import re
import tomllib

import pytest
import typer

import inprocess_cli
from hermes_estop.cli.application import _walk, build_app
from inprocess_cli import run

fleet = inprocess_cli.fleet


def _groups() -> list[list[str]]:
    return [list(path) for path, cmd in _walk(typer.main.get_command(build_app())) if hasattr(cmd, "commands")]


@pytest.mark.parametrize("path", _groups(), ids=lambda p: " ".join(p) or "hermes")
def test_a_bare_group_prints_its_help_on_stdout_and_exits_0(fleet, capsys, path):
    code, out, err = run(capsys, *path)
    assert code == 0 and err == ""
    assert out.startswith(f"Usage: hermes {' '.join(path)}".rstrip()) and "Commands:" in out


@pytest.mark.parametrize("path", _groups(), ids=lambda p: " ".join(p) or "hermes")
def test_command_lists_show_whole_sentences(fleet, capsys, path):
    _, out, _ = run(capsys, *path, "-h")
    listing = out.split("Commands:\n", 1)[1]
    assert "..." not in listing.replace("ARGS...", "").replace("[ARGS]...", "")


def _commands_with_arguments() -> list[list[str]]:
    found = []
    for path, cmd in _walk(typer.main.get_command(build_app())):
        if any(p.param_type_name == "argument" for p in getattr(cmd, "params", [])):
            found.append(list(path))
    return found


@pytest.mark.parametrize("path", _commands_with_arguments(), ids=" ".join)
def test_usage_lines_name_arguments_without_braces(fleet, capsys, path):
    _, out, _ = run(capsys, *path, "-h")
    usage = out.splitlines()[0]
    assert usage.startswith("Usage: hermes") and not re.search(r"[{}]", usage), usage


def test_history_columns_line_up(fleet, capsys):
    run(capsys, "pause", "--reason", "x", "--ttl", "1h", "--fleet")
    run(capsys, "pause", "--profile", "operations", "--reason", "y", "--allow-user", "424242")
    run(capsys, "resume", "--profile", "operations")
    code, out, _ = run(capsys, "history")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    for column in ("gen=", "by="):
        assert len({line.index(column) for line in lines}) == 1, out
    assert all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize("count", [1, 2])
def test_windows_add_writes_array_of_tables(fleet, capsys, count):
    for i in range(count):
        code, _, _ = run(capsys, "windows", "add", f"w{i}", "--cron", "0 3 * * *", "--duration", "1h",
                         "--allow-user", "424242")
        assert code == 0
    text = (fleet / "windows.toml").read_text()
    assert text.count("[[windows]]") == count and "windows = [" not in text
    parsed = tomllib.loads(text)["windows"]
    assert [w["name"] for w in parsed] == [f"w{i}" for i in range(count)]
    assert parsed[-1]["allow"] == {"user_ids": ["424242"]}
