"""Break glass stays visible (issue 37): a hold written with `--override` is named in the
status page's banner and on its card, in a real headless Chromium, for as long as that hold
stands; a hold written outside hermes is shown as such; `hermes status --json` carries both."""

from __future__ import annotations

from pathlib import Path

import pytest
from obs_helpers import Dom, scrape
from test_page_chromium import chromium, run_chromium  # noqa: F401 - the fixture

from hermes_estop import Estop
from hermes_estop.model.policy import PolicyRefused
from hermes_estop.observe.server import StatusServer
from hermes_estop.observe.status import fleet_status

REASON = "INC-7 database on fire"


def page(browser: str, estop: Estop, tmp_path: Path) -> Dom:
    with StatusServer(estop) as server:
        dumped = run_chromium(browser, tmp_path, "--dump-dom", server.url)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = Dom()
    dom.feed(dumped.stdout)
    return dom


@pytest.mark.slow
def test_an_override_is_on_the_page_until_its_hold_ends(chromium: str, estop: Estop, fleet_root: Path,  # noqa: F811
                                                       tmp_path: Path) -> None:
    (fleet_root / "estop.toml").write_text('[policy]\nmax_ttl = "1h"\n')
    hold = estop.engage(reason="reindex", ttl="3h", fleet=True, override=REASON)
    dom = page(chromium, estop, tmp_path)
    banner = [e for e in dom.elements if e.get("data-generation") == hold.generation]
    assert banner and REASON in banner[0]["text"] and "max_ttl" in banner[0]["text"]
    assert REASON in dom.having("override")[0]["text"]

    estop.engage(reason="reindex", ttl="30m", fleet=True, replace=True)  # a new generation, within the policy
    dom = page(chromium, estop, tmp_path)
    assert not [e for e in dom.elements if e.get("id") == "override-banner"]
    assert not dom.having("override")


@pytest.mark.slow
def test_a_hold_written_by_hand_is_shown_as_written_outside_hermes(chromium: str, estop: Estop, fleet_root: Path,  # noqa: F811
                                                                  tmp_path: Path) -> None:
    (fleet_root / "ESTOP").write_text('{"generation": "by-hand", "reason": "hand"}')
    dom = page(chromium, estop, tmp_path)
    assert "outside hermes" in dom.having("outside")[0]["text"]
    document = fleet_status(estop).to_json()
    assert document["written_outside_hermes"] == [{"scope": "fleet", "generation": "by-hand"}]


def test_status_json_names_the_override_and_not_a_hold_within_policy(estop: Estop, fleet_root: Path) -> None:
    (fleet_root / "estop.toml").write_text('[policy]\nrequire_ttl = true\n')
    hold = estop.engage(reason="no deadman", fleet=True, override=REASON)
    document = fleet_status(estop).to_json()
    assert [(o["generation"], o["reason"], o["rule"]) for o in document["overrides"]] == [
        (hold.generation, REASON, "require_ttl")]
    assert document["written_outside_hermes"] == []


def test_refusals_are_counted_and_standing_overrides_shown_in_the_metrics(estop: Estop, fleet_root: Path,
                                                                          server: StatusServer) -> None:
    (fleet_root / "estop.toml").write_text('[policy]\nmax_ttl = "1h"\n')
    before = scrape(server).get(("hermes_estop_policy_refusals_total", (("rule", "max_ttl"),)), 0.0)
    with pytest.raises(PolicyRefused):
        estop.engage(reason="long", ttl="3h", fleet=True)
    estop.engage(reason="long", ttl="3h", fleet=True, override=REASON)
    after = scrape(server)
    assert after[("hermes_estop_policy_refusals_total", (("rule", "max_ttl"),))] == before + 1
    assert after[("hermes_estop_policy_overrides_standing", ())] == 1
