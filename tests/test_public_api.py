"""The public surface is explicit: `__all__` is exactly what the manual's Python API page
(docs/python-api.md) promises."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import hermes_estop

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def documented_names() -> list[str]:
    text = API_PAGE.read_text(encoding="utf-8")
    start = text.index("The public names (`hermes_estop.__all__`):")
    paragraph = text[start:].split("\n\n", 1)[0].split(":", 1)[1]
    return re.findall(r"`(\w+)`", paragraph)


def test_all_is_what_the_python_api_page_documents():
    assert sorted(documented_names()) == sorted(hermes_estop.__all__)


def test_every_public_name_exists():
    missing = [name for name in hermes_estop.__all__ if not hasattr(hermes_estop, name)]
    assert not missing


# Issue 46 item 1: every name a consumer or an integrator uses has one short public home, pinned
# here: a name removed or moved fails these tests (and the docs must say so too).
PUBLIC_TOP = {
    "is_engaged", "is_allowed", "engage", "disengage", "get_state", "paused_reply", "check_paused",
    "sentinel_path", "parse_duration", "GENERATION_FIELD", "SENTINEL_NAME", "retire", "holds", "gate",
    "current", "close", "Estop", "Verdict", "Snapshot", "Hold", "Allow", "Reading", "HoldState", "Fence",
    "Location", "Layout", "AuditEvent", "HoldStore", "FileStore", "UnavailableStore", "open_store",
    "resolve_layout", "VACANT", "FLEET", "MAX_DURATION", "parse_ttl", "format_duration", "in_interval",
    "utc_now", "Clock", "EstopError", "InvalidDuration", "InvalidInstant", "InvalidArgument", "HoldConflict",
    "StoreError", "StoreUnavailable", "StoreRefused", "PolicyRefused", "HoldSource", "PlannedHold", "Forecast",
}
PUBLIC_CONSUMERS = {
    "ConsumerReporter", "gate_scheduler", "gated", "WsgiGate", "AsgiGate", "Work", "refusal",
    "CronService", "KanbanService", "GatewayService",
}


def documented_consumer_names() -> list[str]:
    text = API_PAGE.read_text(encoding="utf-8")
    start = text.index("The consumer-side names (`hermes_estop.consumers.__all__`):")
    paragraph = text[start:].split("\n\n", 1)[0].split(":", 1)[1].split(". ", 1)[0]
    return re.findall(r"`(\w+)`", paragraph)


def test_the_public_names_are_pinned():
    import hermes_estop.consumers

    assert set(hermes_estop.__all__) == PUBLIC_TOP
    assert set(hermes_estop.consumers.__all__) == PUBLIC_CONSUMERS


def test_the_consumer_names_are_what_the_python_api_page_documents():
    import hermes_estop.consumers

    assert sorted(documented_consumer_names()) == sorted(hermes_estop.consumers.__all__)


def test_every_consumer_name_exists():
    import hermes_estop.consumers

    assert [name for name in hermes_estop.consumers.__all__ if not hasattr(hermes_estop.consumers, name)] == []


def test_the_consumer_docs_import_from_the_public_homes():
    docs = API_PAGE.parent
    for page in ("consumers.md", "api.md"):
        imports = re.findall(r"^from (hermes_estop[\w.]*) import", (docs / page).read_text(encoding="utf-8"), re.M)
        assert set(imports) <= {"hermes_estop", "hermes_estop.consumers"}, (page, imports)


# old module path -> (a name it had, the public home that has that name now)
OLD_PATHS = {
    "hermes_estop.reporter": ("ConsumerReporter", "hermes_estop.consumers"),
    "hermes_estop.errors": ("EstopError", "hermes_estop"),
    "hermes_estop.estop": ("Estop", "hermes_estop"),
    "hermes_estop.hold": ("Hold", "hermes_estop"),
    "hermes_estop.homes": ("Layout", "hermes_estop"),
    "hermes_estop.durations": ("parse_ttl", "hermes_estop"),
    "hermes_estop.timeutil": ("utc_now", "hermes_estop"),
    "hermes_estop.gate": ("Verdict", "hermes_estop"),
    "hermes_estop.consumers.service": ("CronService", "hermes_estop.consumers"),
    "hermes_estop.notify.service": ("NotifyService", "hermes_estop.notify"),
    "hermes_estop.notify.worker": ("TargetWorker", "hermes_estop.notify"),
    "hermes_estop.deadman": ("DeadmanService", None),
    "hermes_estop.lease": ("Lease", None),
    "hermes_estop.fsutil": ("atomic_write", None),
    "hermes_estop.windows.service": ("WindowService", None),
    "hermes_estop.fleet.audit": ("coalesce_renewals", None),
    "hermes_estop.stores.audit_files": ("Trail", None),
    "hermes_estop.model.snapshot": ("Snapshot", None),
    "hermes_estop.windows.field_types": ("Cron", None),
    "hermes_estop.windows.invalid": ("InvalidWindow", None),
    "hermes_estop.windows.policy_check": ("refusals_of", None),
    "hermes_estop.model.allow": ("parse_allow", None),
    "hermes_estop.stores.records": ("JsonRecordFile", None),
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_module_path_still_imports_with_a_deprecation_warning_naming_the_new_one(old):
    """In a fresh interpreter: the first import of an old path is what warns."""
    name, home = OLD_PATHS[old]
    program = (
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        f"try:\n    importlib.import_module({old!r})\nexcept DeprecationWarning as exc:\n    print(exc)\n"
        "else:\n    sys.exit('no warning')\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"value = getattr(importlib.import_module({old!r}), {name!r})\n"
        f"home = {home!r}\n"
        f"assert home is None or getattr(importlib.import_module(home), {name!r}) is value\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    assert old in result.stdout and "deprecated" in result.stdout
    assert (home or "hermes_estop.") in result.stdout.split("deprecated", 1)[1]


def test_an_old_module_path_warns_at_the_importing_line():
    program = "import warnings\nwarnings.simplefilter('always')\nfrom hermes_estop.errors import EstopError\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("<string>:3: DeprecationWarning: hermes_estop.errors"), result.stderr


def test_the_old_fleet_module_names_still_import_with_a_deprecation_warning():
    """`hermes_estop.fleet` was a module (`Fleet` and its tables); it is the fleet's package now."""
    program = "import warnings\nwarnings.simplefilter('always')\nfrom hermes_estop.fleet import Fleet\nprint(Fleet.__module__)\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hermes_estop.fleet.fleet"
    assert result.stderr.count("DeprecationWarning") == 1 and "hermes_estop.fleet.fleet" in result.stderr
