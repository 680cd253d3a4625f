"""cli.common's output helpers: long outputs are written in chunks, every line once, in order."""

from __future__ import annotations

import pytest

from hermes_estop.cli.command_io import echo_lines, fit_lines


@pytest.mark.parametrize("count", [0, 1, 2047, 2048, 2049, 5000])
def test_echo_lines_writes_every_line_once_in_order(capsys, count):
    echo_lines(f"line {i}" for i in range(count))
    out = capsys.readouterr().out
    assert out == "".join(f"line {i}\n" for i in range(count))


def test_fit_lines_wraps_lazily_and_indents_continuations():
    lines = fit_lines(["short", "  " + "word " * 30], 40)
    assert next(lines) == "short"
    rest = list(lines)
    assert len(rest) > 1 and all(len(line) <= 40 for line in rest)
    assert rest[0].startswith("  word") and all(line.startswith("    word") for line in rest[1:])
