"""The status page in a real headless Chromium (Debian's `chromium`, installed by `.ci/run`):
a fleet with a hold and two windows; the rendered DOM shows the hold's reason, one lane per
scope and one bar per occurrence, and a screenshot is produced. Under CI (`CI` set) a missing
Chromium fails the test instead of skipping it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from obs_helpers import write_windows

from hermes_estop.observe import StatusServer

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NIGHTLY = {"name": "nightly", "cron": "0 2 * * *", "timezone": "Europe/Berlin", "duration": "2h", "reason": "backup"}
WEEKLY_OPS = {"name": "ops-weekly", "cron": "30 9 * * 3", "timezone": "UTC", "duration": "3h", "scope": "ops"}
REASON = "kernel upgrade <db-1> & reboot"


def find_chromium() -> str | None:
    """`$HERMES_TEST_CHROMIUM` when set (only it), else Debian's /usr/bin/chromium or one on PATH."""
    override = os.environ.get("HERMES_TEST_CHROMIUM")
    candidates = [override] if override else ["/usr/bin/chromium", shutil.which("chromium"),
                                              shutil.which("chromium-browser")]
    return next((p for p in candidates if p and os.access(p, os.X_OK)), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        message = "chromium is not installed (.ci/run installs Debian's chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_chromium(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


class Dom(HTMLParser):
    """The elements of the rendered DOM as (tag, attributes, text of the element's own data)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, str]] = []
        self.stack: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = {"tag": tag, **{k: v or "" for k, v in attrs}, "text": "", "lane": ""}
        for parent in reversed(self.stack):
            if parent["tag"] == "g" and "lane" in parent.get("class", "").split():
                element["lane"] = parent.get("data-scope", "")
                break
        self.elements.append(element)
        if tag not in ("meta", "link", "br", "img", "input", "rect", "line", "path"):
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        if all(element["tag"] != tag for element in self.stack):
            return  # the end of an element never stacked (a rect, a line)
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self.stack:
            element["text"] += data

    def having(self, cls: str) -> list[dict[str, str]]:
        return [e for e in self.elements if cls in e.get("class", "").split()]


@pytest.mark.slow
def test_the_page_renders_the_hold_lanes_and_one_bar_per_occurrence(chromium, estop, fleet_root, tmp_path):
    write_windows(fleet_root, NIGHTLY, WEEKLY_OPS)
    estop.engage(reason=REASON, ttl="6h", fleet=True, allow={"user_ids": ["424242"], "profiles": []})
    with StatusServer(estop) as server:
        dumped = run_chromium(chromium, tmp_path, "--dump-dom", server.url)
        shot = tmp_path / "page.png"
        shooting = run_chromium(chromium, tmp_path, "--window-size=1200,900", f"--screenshot={shot}", server.url)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = Dom()
    dom.feed(dumped.stdout)

    verdict = [e for e in dom.elements if e.get("id") == "verdict"]
    assert verdict and verdict[0]["data-engaged"] == "true"
    cards = dom.having("hold-card")
    assert [c["data-scope"] for c in cards] == ["fleet"]
    assert [e["text"] for e in dom.having("reason")] == [REASON]
    assert "424242" in dom.having("allowlist")[0]["text"]
    assert "in 6h00m" in dom.having("deadline")[0]["text"]

    lanes = [e for e in dom.having("lane") if e["tag"] == "g"]
    assert [lane["data-scope"] for lane in lanes] == ["fleet", "ops"]
    bars = [e for e in dom.having("bar") if e["tag"] == "rect"]
    per_lane = {scope: [b for b in bars if b["lane"] == scope] for scope in ("fleet", "ops")}
    assert len(per_lane["fleet"]) == 7 == int(lanes[0]["data-bars"])  # nightly, a week from Mon 12:00 UTC
    assert len(per_lane["ops"]) == 1 == int(lanes[1]["data-bars"])
    assert {b["data-window"] for b in per_lane["fleet"]} == {"nightly"}
    assert len({b["data-start"] for b in per_lane["fleet"]}) == 7
    holds = [e for e in dom.having("hold") if e["tag"] == "rect"]
    assert [h["lane"] for h in holds] == ["fleet"]
    assert dom.having("deadman")

    assert shooting.returncode == 0, shooting.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.parametrize("ci, outcome, code", [("1", "error", 1), ("", "skipped", 0)])
def test_a_missing_chromium_fails_under_ci_and_skips_elsewhere(tmp_path, ci, outcome, code):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["HERMES_TEST_CHROMIUM"] = str(tmp_path / "no-chromium")
    if ci:
        env["CI"] = ci
    here = Path(__file__).resolve()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
         f"{here}::test_the_page_renders_the_hold_lanes_and_one_bar_per_occurrence"],
        cwd=here.parents[2], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == code, result.stdout[-2000:]
    assert f"1 {outcome}" in result.stdout, result.stdout[-2000:]
    assert "chromium is not installed" in result.stdout
