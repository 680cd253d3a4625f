"""`python bench/protocol_check.py [--bound N] [--triples-bound N] [--only TEXT]`: the hold protocol's
systematic check (tests/stores/protocol) at a larger bound than the test suite's (pairs 2,
triples 1), printing the interleavings explored and the states checked per scenario. Exit 1 on the
first violation, with its numbered schedule."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests" / "stores" / "protocol"))

from checker import explore
from test_hold_protocol import SCENARIOS

from hermes_estop.stores.file import FileStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bound", type=int, default=3, help="preemptions plus crashes, pairs of actors")
    parser.add_argument("--triples-bound", type=int, default=2, help="the same for three actors")
    parser.add_argument("--only", default=None, help="scenarios whose name contains this")
    args = parser.parse_args()
    for scenario, _ in SCENARIOS:
        if args.only and args.only not in scenario.name:
            continue
        bound = args.bound if len(scenario.actors) == 2 else args.triples_bound
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as root:
            result = explore(scenario, Path(root), bound, FileStore, limit=10_000_000)
        print(f"{result.summary()} in {time.monotonic() - started:.1f}s", flush=True)
        if result.violation is not None:
            print(result.violation.describe())
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
