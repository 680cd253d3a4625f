"""What an operator types is refused when it cannot mean what it says (issue 32 item 14): an empty
`drain --ttl` (like `pause --ttl ""`), a number without a unit on the CLI and in windows.toml
(`30m? 30s?`), and `pause --only` naming a component nothing gates as (did you mean ...?), unless
estop.toml declares it or a registered consumer reported it. Each is one line, exit 2, and
nothing is written."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

import inprocess_cli
from hermes_estop import Estop
from hermes_estop.stores.registry import ConsumerEntry
from inprocess_cli import run

fleet = inprocess_cli.fleet  # the fixture: a fleet root as this process's home


def fleet_reading(root):
    estop = Estop(root=root, home=root)
    return estop.store.read((estop.layout.fleet,), estop.clock())[0]


def nothing_written(root) -> bool:
    reading = fleet_reading(root)
    return not (root / "ESTOP").exists() and reading.hold is None and not reading.scoped


@pytest.mark.parametrize("args", [
    ["drain", "--fleet", "--ttl", "", "--timeout", "1s"],
    ["drain", "--fleet", "--ttl", "  ", "--timeout", "1s"],
    ["run", "--fleet", "--ttl", "", "--", "true"],
])
def test_an_empty_drain_ttl_is_refused_like_pause(fleet, capsys, args):
    code, _, err = run(capsys, *args)
    assert code == 2 and err.count("\n") == 1
    assert "--ttl" in err and "empty" in err
    assert nothing_written(fleet)


@pytest.mark.parametrize("args", [
    ["pause", "--fleet", "--ttl", "30"],
    ["pause", "--fleet", "--ttl", " 30 "],
    ["drain", "--fleet", "--ttl", "30", "--timeout", "1s"],
    ["drain", "--fleet", "--timeout", "30"],
    ["pause", "--fleet", "--wait", "--wait-timeout", "30"],
    ["check", "--at", "now", "--for", "30"],
    ["history", "--since", "30"],
    ["windows", "add", "w", "--in", "30", "--duration", "1h"],
    ["windows", "add", "w", "--in", "1h", "--duration", "30"],
    ["windows", "add", "w", "--in", "1h", "--duration", "1h", "--drain", "30"],
    ["run", "--fleet", "--ttl", "30", "--", "true"],
    ["run", "--fleet", "--on-failure-ttl", "30", "--", "true"],
    ["run", "--fleet", "--drain-timeout", "30", "--", "true"],
    ["run", "--fleet", "--drain-timeout", "1m", "--terminate-after", "30", "--", "true"],
])
def test_a_number_without_a_unit_is_refused_with_a_hint(fleet, capsys, args):
    code, _, err = run(capsys, *args)
    assert code == 2 and err.count("\n") == 1, err
    assert "30m? 30s?" in err or ("--since" in err and "2h" in err)
    assert nothing_written(fleet) and not (fleet / "windows.toml").exists()


@pytest.mark.parametrize(("field", "value"), [("duration", "30"), ("duration", '"30"'), ("drain", '"15"'),
                                              ("duration", "90.0"), ("on_failure_ttl", "600")])
def test_a_number_without_a_unit_in_windows_toml_is_refused_naming_the_field(fleet, capsys, field, value):
    table = {"duration": '"1h"', field: value}
    extra = 'run = ["/bin/true"]\n' if field == "on_failure_ttl" else ""
    body = "".join(f"{key} = {text}\n" for key, text in table.items())
    (fleet / "windows.toml").write_text(f'[[windows]]\nname = "w"\ncron = "0 3 * * *"\n{body}{extra}')
    code, _, err = run(capsys, "windows", "validate")
    assert code == 2 and f"field '{field}'" in err and "m? " in err and "s?" in err


def test_zero_is_refused_as_not_positive_without_a_unit_hint(fleet, capsys):
    code, _, err = run(capsys, "pause", "--fleet", "--ttl", "0")
    assert code == 2 and "must be positive" in err and "0m?" not in err


def test_units_are_still_taken(fleet, capsys):
    code, _, err = run(capsys, "pause", "--fleet", "--ttl", "30s")
    assert code == 0, err
    hold = fleet_reading(fleet).hold
    assert hold.expires_at - hold.engaged_at == timedelta(seconds=30)


@pytest.mark.parametrize(("only", "guess"), [("cronn", "cron"), ("kanbna", "kanban"), ("gatway", "gateway"),
                                             ("billing", None)])
def test_pause_only_a_component_nothing_gates_as_is_refused_with_a_did_you_mean(fleet, capsys, only, guess):
    code, _, err = run(capsys, "pause", "--fleet", "--only", only)
    assert code == 2 and err.count("\n") == 1
    assert f"unknown component '{only}'" in err and "components = " in err
    assert (f"did you mean '{guess}'?" in err) if guess else "did you mean" not in err
    assert nothing_written(fleet)


@pytest.mark.parametrize("only", ["cron", "kanban", "gateway", "apscheduler"])
def test_pause_only_a_shipped_component_is_taken(fleet, capsys, only):
    code, _, err = run(capsys, "pause", "--fleet", "--only", only)
    assert code == 0, err


def test_pause_only_a_component_declared_in_estop_toml_is_taken(fleet, capsys):
    (fleet / "estop.toml").write_text('components = ["billing"]\n')
    code, _, err = run(capsys, "pause", "--fleet", "--only", "billing")
    assert code == 0, err
    (scoped,) = fleet_reading(fleet).scoped
    assert scoped.hold.selector.components == {"billing"}


@pytest.mark.parametrize("value", ['"billing"', '[""]', "[1]", '["a\\u0007"]'])
def test_a_bad_components_setting_is_refused_naming_the_file(fleet, capsys, value):
    (fleet / "estop.toml").write_text(f"components = {value}\n")
    code, _, err = run(capsys, "pause", "--fleet", "--only", "billing")
    assert code == 2 and "estop.toml" in err and "components" in err and err.count("\n") == 1
    assert nothing_written(fleet)


def test_pause_only_a_component_a_registered_consumer_reported_is_taken(fleet, capsys):
    now = datetime.now(UTC)
    entry = ConsumerEntry(component="billing", host="h", pid=os.getpid(), pid_start=None, home=str(fleet),
                          profile=None, scopes=("fleet",), version="1", interval=5.0, registered_at=now,
                          reported_at=now)
    Estop(root=fleet, home=fleet).fleet.consumers().put(entry)
    code, _, err = run(capsys, "pause", "--fleet", "--only", "billing")
    assert code == 0, err


# Issue 46 item 4: every number from input is bounded before it is used: a 400-digit duration was
# `internal error: OverflowError` (exit 70); each is one line, exit 2, naming the value.
HUGE = "1" * 400


@pytest.mark.parametrize("args", [
    ["windows", "add", "x", "--cron", "0 0 31 4,6,9,11 *", "--duration", HUGE],
    ["windows", "add", "x", "--cron", "0 0 * * *", "--duration", HUGE],
    ["windows", "add", "x", "--cron", "0 0 * * *", "--duration", "1h", "--drain", HUGE],
    ["windows", "add", "x", "--in", HUGE, "--duration", "1h"],
    ["pause", "--fleet", "--ttl", HUGE],
    ["pause", "--fleet", "--ttl", "9" * 5000],
    ["check", "--at", "now", "--for", HUGE + "s"],
    ["history", "--limit", HUGE],
    ["history", "--limit", "9" * 5000],
    ["kanban", "ready", HUGE],
    ["kanban", "dispatch", "--max", HUGE],
])
def test_a_huge_number_is_refused_naming_it_never_an_internal_error(fleet, capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 2, err
    assert err.count("\n") == 1 and "internal error" not in err and "Traceback" not in err
    assert "1111" in err or "9999" in err or args[-2] in err, err  # the value, or the option it was given to
    assert nothing_written(fleet) and not (fleet / "windows.toml").exists()


@pytest.mark.parametrize("value", [int(HUGE), -int(HUGE), 10**5000], ids=["huge", "-huge", "5001-digits"])
def test_a_huge_number_of_seconds_is_refused_by_the_library(value):
    from hermes_estop import InvalidDuration, parse_ttl
    from hermes_estop.model.durations import parse_with_unit

    for parse in (parse_ttl, parse_with_unit):
        with pytest.raises(InvalidDuration):
            parse(value)
