"""The exit codes of `hermes` (a leaf: `cli.fast_path`, which every `hermes check` imports, and
`cli.common` both take them from here)."""

from __future__ import annotations

__all__ = ["EXIT_HELD", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "GATE_HELD_EXIT"]

EXIT_OK = 0
EXIT_HELD = 1
EXIT_USAGE = 2
#: `hermes gate` exits with this when held: EX_TEMPFAIL, "try again later".
GATE_HELD_EXIT = 75
EXIT_NOT_FOUND = 127
