"""Each hold card on the status page says how to lift that hold from here, as `hermes status`
does, and, for a hold a window armed, when that window holds next (issue 38)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from obs_helpers import Dom, write_windows

from hermes_estop import Estop
from hermes_estop.observe.page import render_page
from hermes_estop.observe.status import fleet_status
from hermes_estop.observe.view import Observer

NY_BACKUP = {"name": "nightly-backup", "cron": "0 8 * * *", "timezone": "America/New_York", "duration": "2h",
             "reason": "backup"}
#: 08:40 EDT: the 08:00-10:00 EDT occurrence (12:00-14:00 UTC) covers now
COVERED = datetime(2026, 6, 1, 12, 40, tzinfo=UTC)


def cards(estop) -> list[dict[str, str]]:
    dom = Dom()
    dom.feed(render_page(Observer(estop).view(7)))
    by_card: list[dict[str, str]] = []
    for element in dom.elements:
        if "hold-card" in element.get("class", "").split():
            by_card.append({"scope": element["data-scope"]})
        elif by_card and element["tag"] == "dd":
            by_card[-1][element["class"]] = " ".join(element["text"].split())
    return by_card


@pytest.mark.parametrize("arm, lift", [
    (lambda e: e.engage(reason="r", fleet=True), "hermes resume"),
    (lambda e: e.fleet.engage(e.fleet.location("ops"), *e.engage_request("r")), "hermes resume --profile ops"),
    (lambda e: e.engage(only="kanban", hold_id="abc123", fleet=True), "hermes resume --hold abc123"),
])
def test_each_hold_card_shows_the_command_that_lifts_it_from_here(estop, clock, arm, lift):
    arm(estop)
    [card] = cards(estop)
    assert card["lift"] == f"{lift} (from here)"
    status = fleet_status(estop).to_json()
    assert [h["lift"] for h in status["holds"] + status["other_holds"]] == [lift]  # what `hermes status` says


def test_a_profile_home_lifts_the_fleet_hold_with_fleet(fleet_root, clock):
    ops = Estop(home=fleet_root / "profiles" / "ops", root=fleet_root, clock=clock, store="file")
    try:
        ops.engage(reason="r", fleet=True)
        assert [c["lift"] for c in cards(ops)] == ["hermes resume --fleet (from here)"]
    finally:
        ops.close()


def test_a_window_holds_card_shows_the_windows_next_occurrence(estop, fleet_root, clock):
    clock.set(COVERED)
    write_windows(fleet_root, NY_BACKUP)
    estop.engage(reason="backup", ttl="80m", fleet=True, armed_by="window:nightly-backup",
                 window={"name": "nightly-backup", "occurrence": "2026-06-01T12:00:00+00:00"})
    [card] = cards(estop)
    assert card["window"] == "nightly-backup"
    assert card["window-next"] == ("2026-06-02 12:00:00 UTC = 2026-06-02 08:00:00 EDT (America/New_York) "
                                   "(in 23h20m)")


@pytest.mark.parametrize("windows, says", [([], "none: the window is no longer in windows.toml"),
                                           ([NY_BACKUP | {"enabled": False}], "none: the window is disabled")])
def test_a_window_holds_card_says_why_no_occurrence_follows(estop, fleet_root, clock, windows, says):
    clock.set(COVERED)
    write_windows(fleet_root, *windows)
    estop.engage(reason="backup", ttl="80m", fleet=True, window={"name": "nightly-backup"})
    assert cards(estop)[0]["window-next"] == says


def test_a_card_without_a_window_has_no_next_occurrence(estop, clock):
    estop.engage(reason="r", fleet=True)
    assert "window-next" not in cards(estop)[0]
