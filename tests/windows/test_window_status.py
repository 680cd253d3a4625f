"""The windows section of `hermes status`: next occurrence, whether one is active, never raising."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from hermes_estop.stores.base import LEDGER_FILE
from hermes_estop.windows.status import windows_section


def test_no_windows_adds_nothing(harness):
    assert windows_section(harness.estop.fleet, harness.clock.now) == {"json": {"windows": []}, "lines": []}


def test_shows_the_next_occurrence_and_the_active_one(harness):
    now = harness.clock.now
    harness.write({"name": "active", "at": (now - timedelta(minutes=5)).isoformat(), "duration": "1h"},
                  {"name": "later", "cron": "0 3 * * *", "timezone": "Europe/Berlin", "duration": "1h"})
    harness.start()
    section = windows_section(harness.estop.fleet, now)
    rows = {row["name"]: row for row in section["json"]["windows"]}
    assert rows["active"]["active"] is True
    assert rows["active"]["current"]["state"] == "armed"
    assert rows["active"]["next"] is None
    assert rows["later"]["active"] is False
    assert rows["later"]["next"]["start"] == (now + timedelta(days=1)).replace(hour=1, minute=0).isoformat()
    text = "\n".join(section["lines"])
    assert "ACTIVE now" in text and "scheduler: armed" in text and "next " in text
    json.dumps(section["json"])


@pytest.mark.parametrize("body", [b'[[windows]]\nname = "x"\ncron = "* *"\nduration = "1h"\n', b"\xff\xfe", b"[[["])
def test_a_bad_windows_file_is_one_line_not_an_exception(harness, body):
    harness.file.path.write_bytes(body)
    section = windows_section(harness.estop.fleet, harness.clock.now)
    assert section["json"]["windows"] == []
    assert str(harness.file.path) in section["json"]["windows_error"]
    [line] = section["lines"]
    assert line.startswith("windows: ")


def test_a_broken_ledger_still_shows_the_windows(harness):
    harness.write({"name": "later", "cron": "0 3 * * *", "duration": "1h"})
    (harness.root / LEDGER_FILE).write_text("{")
    section = windows_section(harness.estop.fleet, harness.clock.now)
    assert [row["name"] for row in section["json"]["windows"]] == ["later"]
    assert "unreadable" in section["json"]["windows_error"]


def test_each_rendering_alone_is_the_one_of_both(harness):
    now = harness.clock.now
    harness.write({"name": "active", "at": (now - timedelta(minutes=5)).isoformat(), "duration": "1h", "drain": "10m"},
                  {"name": "later", "cron": "0 3 * * *", "timezone": "Europe/Berlin", "duration": "1h"},
                  {"name": "off", "cron": "0 4 * * *", "duration": "2h", "enabled": False})
    harness.start()
    both = windows_section(harness.estop.fleet, now)
    only_json = windows_section(harness.estop.fleet, now, as_json=True)
    only_lines = windows_section(harness.estop.fleet, now, as_json=False)
    assert only_json["json"] == both["json"] and only_json["lines"] == []
    assert only_lines["lines"] == both["lines"] and only_lines["json"] == {}
    assert len(both["json"]["windows"]) == 3 and len(both["lines"]) > 3
