"""Issue 19: one status document, every rendering. A fleet of the root and three profiles holds
by hand, by a window and unreadably; `hermes status` (text and JSON, from the root and from a
profile), /api/status, /metrics, the page and `hermes serve`'s shutdown line name the same set
of holds."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from obs_helpers import fetch, scrape, write_windows

import hermes_estop
from hermes_estop import Estop
from hermes_estop.observe.server import StatusServer
from hermes_estop.observe.status import fleet_status, lift_command
from hermes_estop.windows.scheduler import WindowService
from inprocess_cli import completed

SRC = str(Path(hermes_estop.__file__).parent.parent)


class Hermes:
    """`hermes` run from `home` of fleet `root`: in this process (`completed`), or with `popen` as
    a real subprocess."""

    def __init__(self, home: Path, root: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
        self.env.update(HERMES_HOME=str(home), HERMES_ROOT=str(root), PYTHONPATH=SRC)

    def __call__(self, *args: str, check: int) -> subprocess.CompletedProcess[str]:
        result = completed(self.env, *args)
        assert result.returncode == check, result.stdout + result.stderr
        return result

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "hermes_estop", *args], env=self.env, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


#: the holds the fleet below has, by scope: (state, armed how)
EXPECTED = {"fleet": "active", "batch": "active", "ops": "active", "broken": "unreadable"}


@pytest.fixture
def held_fleet(tmp_path: Path) -> Path:
    """Root held by hand, `ops` by hand with a deadman, `batch` by a window, `broken` unreadable,
    `idle` a profile home with no hold. Real clock: the CLI subprocesses read it too."""
    root = tmp_path / "fleet"
    for name in ("batch", "ops", "broken", "idle"):
        (root / "profiles" / name).mkdir(parents=True)
    root_view = Estop(home=root, root=root, store="file", actor="operator@test")
    root_view.engage(reason="root by hand")
    root_view.for_profile("ops").engage(reason="ops by hand", ttl="2h")
    (root / "profiles" / "broken" / "ESTOP").write_bytes(b"{not json")
    now = datetime.now(UTC).replace(microsecond=0)
    write_windows(root, {"name": "nightly", "at": (now - timedelta(minutes=1)).isoformat(), "duration": "2h",
                         "scope": "batch", "reason": "batch window"})
    report = WindowService(root_view.fleet, poll_interval=1.0).tick()
    assert report.ok and not report.errors
    root_view.close()
    return root


def _scopes_of(holds: list[dict]) -> dict[str, str]:
    return {hold["scope"]: hold["state"] for hold in holds}


def test_the_status_document_from_the_root_and_from_a_profile_names_every_hold(held_fleet):
    for home in (held_fleet, held_fleet / "profiles" / "idle", held_fleet / "profiles" / "ops"):
        document = fleet_status(Estop(home=home, root=held_fleet, store="file")).to_json()
        assert _scopes_of(document["holds"] + document["other_holds"]) == EXPECTED
        assert _scopes_of(document["fleet"]["holds"]) == EXPECTED
        assert document["fleet"]["active"] == len(EXPECTED)


@pytest.mark.parametrize("home", ["root", "idle", "ops"])
def test_hermes_status_json_from_anywhere_names_every_hold_of_the_fleet(held_fleet, home):
    where = held_fleet if home == "root" else held_fleet / "profiles" / home
    result = Hermes(where, held_fleet)("status", "--json", check=0)
    document = json.loads(result.stdout)
    assert _scopes_of(document["holds"] + document["other_holds"]) == EXPECTED
    mine = {hold["scope"] for hold in document["holds"]}
    assert mine == ({"fleet"} if home in ("root", "idle") else {"fleet", "ops"})


def test_hermes_status_text_at_the_root_lists_profile_holds_with_the_command_that_lifts_each(held_fleet):
    out = Hermes(held_fleet, held_fleet)("status", check=0).stdout
    assert out.startswith("HELD: new work is paused (1 active hold(s))")
    assert "elsewhere in the fleet: 3 active hold(s)" in out
    for scope in ("profile batch", "profile ops", "profile broken"):
        assert f"HELD  {scope}" in out
    assert "lift       hermes resume --profile ops" in out
    assert "lift       hermes resume --profile batch" in out
    assert "lift       hermes resume\n" in out  # the root's own hold, from the root


def test_a_profile_status_names_the_fleet_command_for_the_root_hold(held_fleet):
    out = Hermes(held_fleet / "profiles" / "ops", held_fleet)("status", check=0).stdout
    start = out.index("HELD  fleet")
    fleet_part = out[start:out.index("elsewhere in the fleet", start)]
    assert "lift       hermes resume --fleet" in fleet_part
    own = out[out.index("HELD  profile ops"):start]
    assert "lift       hermes resume\n" in own


def test_the_resume_hint_is_a_command_that_lifts_it(held_fleet):
    ops = Hermes(held_fleet / "profiles" / "ops", held_fleet)
    out = ops("resume", check=0).stdout
    assert "still held by fleet (hermes resume --fleet)" in out
    Hermes(held_fleet, held_fleet)("resume", "--profile", "batch", check=0)
    document = json.loads(Hermes(held_fleet, held_fleet)("status", "--json", check=0).stdout)
    assert "batch" not in _scopes_of(document["holds"] + document["other_holds"])


@pytest.mark.parametrize("scope, home, expected", [
    ("fleet", "root", "hermes resume"),
    ("fleet", "ops", "hermes resume --fleet"),
    ("ops", "ops", "hermes resume"),
    ("ops", "root", "hermes resume --profile ops"),
    ("ops", "batch", "hermes resume --profile ops"),
])
def test_lift_command_names_the_scope_from_where_it_is_run(tmp_path, scope, home, expected):
    root = tmp_path / "fleet"
    view = Estop(home=root if home == "root" else root / "profiles" / home, root=root, store="file")
    location = view.fleet.location(scope)
    assert lift_command(location, view.layout) == expected


def test_api_status_metrics_and_the_page_name_the_same_holds(held_fleet):
    estop = Estop(home=held_fleet, root=held_fleet, store="file")
    with StatusServer(estop, "127.0.0.1", 0) as server:
        status, _, body = fetch(server.url + "api/status")
        assert status == 200
        document = json.loads(body)
        assert _scopes_of(document["holds"] + document["other_holds"]) == EXPECTED
        samples = scrape(server)
        active = {dict(labels)["scope"] for (name, labels), value in samples.items()
                  if name == "hermes_estop_hold_active" and value == 1}
        unreadable = {dict(labels)["scope"] for (name, labels), value in samples.items()
                      if name == "hermes_estop_hold_unreadable" and value == 1}
        assert active == set(EXPECTED) and unreadable == {"broken"}
        assert samples[("hermes_estop_hold_active", (("scope", "idle"),))] == 0
        page = fetch(server.url)[2].decode()
        cards = dict(re.findall(r'class="hold-card state-\w+" data-scope="([^"]+)" data-state="(\w+)"', page))
        assert cards == EXPECTED
    estop.close()


def test_serve_on_sigterm_names_every_hold_it_leaves_standing(held_fleet):
    proc = Hermes(held_fleet, held_fleet).popen("serve", "--interval", "0.2")
    try:
        for line in proc.stderr:  # type: ignore[union-attr]
            if "serve: running" in line:
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    [line] = [line for line in err.splitlines() if "serve: stopped" in line]
    assert "leaving 4 hold(s) standing" in line
    for scope in ("fleet", "profile batch armed by", "profile ops", "profile broken unreadable"):
        assert scope in line
