"""A broken windows.toml is visible (issue 20 item 3): a metric for the file's state and one per
failing window, the problem in the page's banner (not only at the bottom), `windows timeline`
exit 2 with the whole line (the scheduler's logging: tests/windows/test_window_problem_log.py)."""

from __future__ import annotations

import re

import pytest
from obs_helpers import fetch, scrape, write_windows

import inprocess_cli
from inprocess_cli import run

fleet = inprocess_cli.fleet

BROKEN = {
    "not TOML": '[[windows]]\nname = "maint"\ncron = "0 3 * * *"\nduration = ',
    "one window": ('[[windows]]\nname = "good"\ncron = "0 3 * * *"\nduration = "1h"\n\n'
                   '[[windows]]\nname = "far"\nat = 9999-12-31T23:30:00Z\nduration = "1h"\n'),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_metrics_say_when_windows_toml_or_a_window_fails(fleet_root, server, kind):
    write_windows(fleet_root, {"name": "good", "cron": "0 3 * * *", "duration": "1h"})
    samples = scrape(server)
    assert samples[("hermes_estop_windows_file_valid", ())] == 1.0
    assert not any(name == "hermes_estop_window_failed" for name, _ in samples)
    (fleet_root / "windows.toml").write_text(BROKEN[kind])
    samples = scrape(server)
    assert samples[("hermes_estop_windows_file_valid", ())] == 0.0
    failed = {dict(labels)["window"] for name, labels in samples if name == "hermes_estop_window_failed"}
    assert failed == (set() if kind == "not TOML" else {"far"})


@pytest.mark.parametrize("kind", BROKEN)
def test_the_page_puts_a_broken_windows_file_in_its_banner(fleet_root, server, kind):
    write_windows(fleet_root, {"name": "good", "cron": "0 3 * * *", "duration": "1h"})
    (fleet_root / "windows.toml").write_text(BROKEN[kind])
    status, _, body = fetch(server.url)
    page = body.decode()
    assert status == 200
    banner = re.search(r'<div id="problem-banner".*?</div>', page, re.S)
    assert banner is not None and page.index('id="problem-banner"') < page.index('id="holds"')
    assert "windows.toml" in banner.group(0)
    assert ("window &#x27;far&#x27;" in banner.group(0)) is (kind == "one window")


@pytest.mark.parametrize("kind", BROKEN)
def test_windows_timeline_exits_2_with_the_whole_line_on_a_broken_file(fleet, capsys, kind):
    (fleet / "windows.toml").write_text(BROKEN[kind])
    code, out, err = run(capsys, "windows", "timeline")
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("hermes: error: ") and str(fleet / "windows.toml") in line
    assert len(line) > 80 and ("field 'at'" in line if kind == "one window" else "not valid TOML" in line)
