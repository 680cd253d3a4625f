"""The modules one write goes through (issue 45 item 2): a hold armed or lifted through `Fleet`
on the sentinel-file store visits the fleet, the policy guard, the model's values, the store and
the file primitives, and nothing else. A new hop on the write path (a module split off, a helper
reached through another level) shows here before it shows in `bench/windows_arm_path.py`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from hermes_estop.fleet.fleet import Fleet
from hermes_estop.model.hold import EngageRequest

#: every module a write on the file store may visit: 12 (the file trail was two modules, the
#: actor a third: `stores.audit_files` and `fleet.audit` before issue 45; the allowlist a fourth,
#: `model.allow`, before it joined the hold whose body carries it)
WRITE_PATH = {
    "hermes_estop.fleet.fleet", "hermes_estop.fleet.policy_guard",
    "hermes_estop.model.audit_event", "hermes_estop.model.hold", "hermes_estop.model.homes",
    "hermes_estop.model.policy", "hermes_estop.model.timeutil",
    "hermes_estop.stores.audit_log", "hermes_estop.stores.base", "hermes_estop.stores.file",
    "hermes_estop.system.fsread", "hermes_estop.system.fsutil",
}
#: what a policy adds: the write's judgement (under the store's lock) and the policy's durations
#: (`max_ttl`, read again for every write)
JUDGED = {"hermes_estop.model.judgement", "hermes_estop.model.durations"}


@contextmanager
def visited() -> Iterator[set[str]]:
    """The package modules whose functions are called inside the block."""
    modules: set[str] = set()

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("hermes_estop"):
                modules.add(name)

    sys.setprofile(hook)
    try:
        yield modules
    finally:
        sys.setprofile(None)


def arm(fleet: Fleet) -> None:
    expires_at = datetime.now(UTC) + timedelta(hours=1)  # the store's wall clock judges a deadline
    fleet.engage(fleet.fleet_location, EngageRequest(reason="maintenance", expires_at=expires_at))


def lift(fleet: Fleet) -> None:
    fleet.release(fleet.fleet_location)


@pytest.fixture(params=[None, 'max_ttl = "1d"\n'], ids=["no-policy", "policy"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A fleet root, with or without a policy, whose writes have run once: a module's first
    import runs its own code, which is not the write's path."""
    if request.param is not None:
        (tmp_path / "estop.toml").write_text("[policy]\n" + request.param)
    warm = Fleet.of_files(tmp_path)
    arm(warm)
    lift(warm)
    return tmp_path


@pytest.mark.parametrize("write", [arm, lift], ids=["arm", "lift"])
def test_a_write_visits_only_the_write_path_modules(root: Path, write: Callable[[Fleet], None]) -> None:
    if write is lift:
        arm(Fleet.of_files(root))
    fleet = Fleet.of_files(root)  # a fresh fleet: who it writes as is resolved on this write
    with visited() as modules:
        write(fleet)
    allowed = WRITE_PATH | (JUDGED if (root / "estop.toml").exists() else set())
    assert sorted(modules - allowed) == []
    assert {"hermes_estop.fleet.fleet", "hermes_estop.stores.file", "hermes_estop.stores.audit_log"} <= modules
