"""The status page's "holds back" column (issue 47 item 4) in a real headless Chromium: each
upcoming occurrence says how many cron runs and ready cards it holds back, the details (per home
and job, the cards, the gateway) one click away in a `<details>`; at 1280 and 390 px nothing is
wider than the screen. The screenshots in docs/ (page-impact-*.png) are made by this test with
`HERMES_SCREENSHOT_DIR` set."""

from __future__ import annotations

import os
import shutil
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cdp import Browser
from obs_helpers import Dom, write_windows
from test_page_chromium import CHROMIUM_FLAGS, chromium  # noqa: F401 - the fixture

from hermes_estop.consumers.board import Board
from hermes_estop.consumers.crontable import CronTable
from hermes_estop.observe.server import StatusServer

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "Europe/Berlin", "duration": "2h", "drain": "15m",
           "allow": {"user_ids": ["42"]}}
OPS = {"name": "ops-weekly", "cron": "30 9 * * 3", "duration": "3h", "scope": "ops", "only": ["kanban"]}

OPEN_FIRST = """(() => {
  const details = document.querySelector('#upcoming td.impact details');
  details.querySelector('summary').click();
  const root = document.documentElement;
  return {open: details.open, text: details.innerText, scrollWidth: root.scrollWidth, clientWidth: root.clientWidth};
})()"""


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 390])
def test_each_upcoming_occurrence_says_what_it_holds_back(chromium, estop, fleet_root, clock, tmp_path, width):  # noqa: F811
    clock.set(NOW)
    (fleet_root / "profiles" / "ops").mkdir(parents=True)
    write_windows(fleet_root, NIGHTLY, OPS)
    root_table = CronTable(fleet_root)
    root_table.add("db-backup", "true", now=NOW, schedule="30 2 * * *", timezone="Europe/Berlin", owner="7")
    root_table.add("db-vacuum", "true", now=NOW, schedule="15 3 * * *", timezone="Europe/Berlin", owner="42")
    CronTable(fleet_root / "profiles" / "ops").add("sync", "true", now=NOW, schedule="*/30 * * * *", owner="9")
    board = Board(fleet_root, clock=clock)
    for i, profile in enumerate(("ops", "ops", None)):
        board.add(f"card {i}", "true", owner="8", profile=profile, ready=True, now=NOW - timedelta(hours=i))
    with StatusServer(estop) as server, Browser(chromium, tmp_path / "profile", CHROMIUM_FLAGS) as browser:
        page = browser.open(server.url, width)
        dom = Dom()
        dom.feed(page.dom())
        opened = page.evaluate(OPEN_FIRST)
        shot = tmp_path / f"page-impact-{width}.png"
        page.screenshot(shot)

    cells = [e for e in dom.having("impact") if e["tag"] == "td"]
    # the first row: nightly of 2026-06-02 (00:00-02:00 UTC, drained from 23:45): the backup and
    # the ops home's half-hourly sync (00:00, 00:30, 01:00, 01:30) held, the vacuum's owner admitted; all three cards wait
    assert (cells[0]["data-held-runs"], cells[0]["data-ready-cards"]) == ("5", "3")
    assert "5 cron runs, 3 ready cards" in " ".join(cells[0]["text"].split())
    # ops-weekly (kanban only, at ops) holds no cron run and the two cards assigned to ops
    rows = [e for e in dom.elements if e["tag"] == "tr" and e.get("data-window")]
    ops_row = next(i for i, row in enumerate(rows) if row["data-window"] == "ops-weekly")
    assert (cells[ops_row]["data-held-runs"], cells[ops_row]["data-ready-cards"]) == ("0", "2")
    # one click: the details, per home and job
    assert opened["open"] is True
    assert "held  db-backup (owner 7): 1 run(s)" in opened["text"] and "runs  db-vacuum (owner 42)" in opened["text"]
    assert "kanban: 3 ready card(s) would wait" in opened["text"]
    assert opened["scrollWidth"] <= opened["clientWidth"] == width

    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">I", png[16:20])[0] == width
    keep = os.environ.get("HERMES_SCREENSHOT_DIR")  # docs/page-impact-*.png are made this way
    if keep:
        shutil.copyfile(shot, Path(keep) / shot.name)
