"""The window model and windows.toml: every invalid field is refused with an error naming it, and
what is saved loads back equal."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hermes_estop.model.errors import EstopError
from hermes_estop.windows.calendars import CalendarSource
from hermes_estop.windows.model import InvalidWindow, Window, WindowsDocument
from hermes_estop.windows.windows_file import WindowsFile

GOOD = {"name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "duration": "1h"}


def with_(**changes):
    data = dict(GOOD)
    for key, value in changes.items():
        if value is ...:
            data.pop(key, None)
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    "data, field, words",
    [
        pytest.param(with_(cron="0 30 2 * * *"), "cron", "exactly 5 fields", id="cron-six-fields"),
        pytest.param(with_(timezone="Mars/Olympus_Mons"), "timezone", "Mars/Olympus_Mons", id="unknown-zone"),
        pytest.param(with_(duration="0"), "duration", "must be positive", id="zero-duration"),
        pytest.param(with_(duration="0s"), "duration", "must be positive", id="zero-unit-duration"),
        pytest.param(with_(duration="-1h"), "duration", "must be positive", id="negative-duration"),
        pytest.param(with_(duration="367d"), "duration", "366-day bound", id="oversized-duration"),
        pytest.param(with_(duration="soon"), "duration", "'soon'", id="unparsable-duration"),
        pytest.param(with_(duration=...), "duration", "required", id="missing-duration"),
        pytest.param(with_(at="2026-12-02T18:00:00Z"), "cron/at", "exactly one of cron", id="both-cron-and-at"),
        pytest.param(with_(cron=..., timezone=...), "cron/at", "exactly one of cron", id="neither-cron-nor-at"),
        pytest.param(with_(name="Nightly DB"), "name", "'Nightly DB'", id="name-not-a-slug"),
        pytest.param(with_(name=""), "name", "invalid window name", id="name-empty"),
        pytest.param(with_(name="x" * 65), "name", "invalid window name", id="name-too-long"),
        pytest.param(with_(name="-dash"), "name", "'-dash'", id="name-leading-dash"),
        pytest.param(with_(name=...), "name", "required", id="name-missing"),
        pytest.param(with_(scope="a/b"), "scope", "'a/b'", id="scope-path"),
        pytest.param(with_(allow={"profiles": ["bot"]}), "allow", "without a user id", id="allow-profile-only"),
        pytest.param(with_(allow={"users": ["1"]}), "allow.users", "unknown field", id="allow-unknown-key"),
        pytest.param(with_(allow={"user_ids": "424242"}), "allow", "expected a list", id="allow-bare-string"),
        pytest.param(with_(enabled="yes"), "enabled", "'yes'", id="enabled-not-bool"),
        pytest.param(with_(reason="x" * 1001), "reason", "longer than 1000", id="reason-too-long"),
        pytest.param(with_(cron=..., timezone="Europe/Berlin", at="2026-12-02T18:00:00Z"), "timezone",
                     "cron windows only", id="timezone-with-at"),
        pytest.param(with_(cron=..., timezone=..., at="tomorrow"), "at", "'tomorrow'", id="at-unparsable"),
        pytest.param(with_(not_before="2026-07-01T00:00:00Z", not_after="2026-06-01T00:00:00Z"), "not_after",
                     "not after not_before", id="bounds-inverted"),
        pytest.param(with_(not_before="whenever"), "not_before", "'whenever'", id="bound-unparsable"),
        pytest.param(with_(tz="UTC"), "tz", "unknown field", id="unknown-field"),
    ],
)
def test_invalid_field_is_refused_naming_the_field(data, field, words):
    with pytest.raises(InvalidWindow) as caught:
        Window.parse(data, index=0)
    error = caught.value
    assert error.field == field
    assert f"field {field!r}" in str(error)
    assert words in str(error)
    assert "\n" not in str(error)
    assert isinstance(error, EstopError) and isinstance(error, ValueError)


@pytest.mark.parametrize("model, data", [(Window, GOOD), (CalendarSource, {"name": "holidays", "ics": "h.ics"})])
@pytest.mark.parametrize("value", [1, 0, "yes", "true"])
def test_an_enabled_that_is_not_a_boolean_is_refused_as_expected_true_or_false(model, data, value):
    """The wording windows.toml's refusal has always had (an operator writing `enabled = "yes"` or
    `1` is told what to write), whichever validator refuses it."""
    with pytest.raises(InvalidWindow) as caught:
        model.parse({**data, "enabled": value}, index=0)
    assert caught.value.field == "enabled"
    assert str(caught.value).endswith(f"field 'enabled': invalid enabled {value!r}: expected true or false")


@pytest.mark.parametrize("data, field", [
    (with_(scope="../etc"), "scope"),
    (with_(allow={"profiles": ["ops"]}), "allow"),
    (with_(allow={"user_ids": ["ok", ""]}), "allow"),
])
def test_a_refusal_is_given_every_time_the_same_bad_value_is_read(data, field):
    """Allowlists are kept once validated (a fleet's windows share a few): a bad one
    is refused again, not remembered as good."""
    for _ in range(3):
        with pytest.raises(InvalidWindow) as caught:
            Window.parse(data)
        assert caught.value.field is not None and caught.value.field.startswith(field)


def test_an_allowlist_of_numbers_is_read_as_text_and_a_boolean_refused_after_its_number():
    """Kept allowlists are keyed by text only: `[1]` and `[True]` are equal keys, not equal lists."""
    assert Window.parse(with_(allow={"user_ids": [1, "2"]})).allow.user_ids == ["1", "2"]
    assert Window.parse(with_(allow={"user_ids": ["1", "2"]})).allow.user_ids == ["1", "2"]
    with pytest.raises(InvalidWindow, match="True"):
        Window.parse(with_(allow={"user_ids": [True, "2"]}))


def test_error_names_the_window_by_name_or_position():
    with pytest.raises(InvalidWindow, match=r"^window 'nightly': field 'duration'"):
        Window.parse(with_(duration="0"))
    with pytest.raises(InvalidWindow, match=r"^window #3: field 'name'"):
        Window.parse(with_(name="BAD"), index=2)


def test_valid_window_normalises_its_fields():
    window = Window.parse(with_(cron="  30   2 * * *  ", reason="  db \n maintenance ",
                                allow={"user_ids": [424242, "7"], "profiles": ["ops"]}, scope="ops"))
    assert window.cron == "30 2 * * *"
    assert window.duration == timedelta(hours=1)
    assert window.reason == "db maintenance"
    assert window.allow.user_ids == ["424242", "7"]
    assert window.hold_allow.admits("424242", "ops") and not window.hold_allow.admits("424242", "bot")
    assert window.scope == "ops"


def test_one_shot_at_without_offset_is_utc():
    window = Window.parse({"name": "once", "at": "2026-12-02T18:00:00", "duration": "PT2H"})
    assert window.at == datetime(2026, 12, 2, 18, tzinfo=UTC)
    assert window.duration == timedelta(hours=2)


def full_windows() -> list[Window]:
    return [
        Window.parse(GOOD),
        Window.parse({"name": "weekly-ops", "cron": "0 22 * * 0", "timezone": "America/New_York", "duration": "1d2h",
                      "reason": "weekly", "allow": {"user_ids": ["1", "2"], "profiles": ["ops"]}, "scope": "ops",
                      "enabled": False, "not_before": "2026-01-01T00:00:00Z", "not_after": "2027-01-01T00:00:00Z"}),
        Window.parse({"name": "once", "at": "2026-12-02T18:30:15.250000+01:00", "duration": "90s"}),
    ]


def test_round_trip_through_windows_toml(tmp_path: Path):
    windows_file = WindowsFile(tmp_path)
    windows = full_windows()
    windows_file.save(windows)
    assert windows_file.load() == windows
    windows_file.save(windows_file.load())
    assert windows_file.load() == windows


@pytest.mark.parametrize("window", [
    *full_windows(),
    Window.parse(with_(drain="15m", exclude=["2026-12-24", "2026-12-25"], exclude_cron="* * 1 1 *", only=["cron"],
                       jobs=["nightly-*"], run=["/bin/true", "--flag"], on_failure_ttl="2h",
                       exclude_calendar="holidays.ics", reason="Wartung für die Datenbank \u2014 nachts")),
    Window.parse({"name": "once-zoned", "at": "2026-12-02T18:00:00Z", "timezone": "UTC", "duration": "1h"}),
], ids=lambda window: window.name)
def test_a_windows_compact_json_bytes_are_its_json(window: Window):
    """The compiled schedule keeps `to_json_bytes` per row: what a command decodes is `to_json`."""
    data = window.to_json_bytes()
    assert json.loads(data) == window.to_json()
    given = {key for key in ("drain", "exclude", "exclude_cron", "only", "jobs", "run", "on_failure_ttl",
                             "exclude_calendar") if getattr(window, key)}
    assert set(window.to_json()) == {"name", "cron", "timezone", "at", "duration", "reason", "allow", "scope",
                                     "enabled", "not_before", "not_after"} - ({"timezone"} if window.cron is None
                                                                              else set()) | given
    if data.isascii():
        assert data == json.dumps(window.to_json(), separators=(",", ":")).encode()
    else:  # UTF-8 as it is, not escaped
        assert "für".encode() in data


def test_hand_written_toml_with_native_datetimes_loads(tmp_path: Path):
    (tmp_path / "windows.toml").write_text(
        '[[windows]]\nname = "once"\nat = 2026-12-02T18:00:00Z\nduration = "45m"\n'
        'allow = { user_ids = [424242] }\n'
    )
    [window] = WindowsFile(tmp_path).load()
    assert window.at == datetime(2026, 12, 2, 18, tzinfo=UTC)
    assert window.allow.user_ids == ["424242"]


@pytest.mark.parametrize(
    "text, words",
    [
        pytest.param('[[windows]]\nname = "a"\ncron = "* * * *"\nduration = "1h"\n',
                     "window 'a': field 'cron'", id="bad-field"),
        pytest.param('[[windows]]\nname = "a"\ncron = "* * * * *"\nduration = "1h"\n'
                     '[[windows]]\nname = "a"\nat = "2026-01-01T00:00:00Z"\nduration = "1h"\n',
                     "window 'a': field 'name': duplicate name", id="duplicate-name"),
        pytest.param('[[windows]]\nname = "a"\nduration = \n', "not valid TOML", id="not-toml"),
        pytest.param('[[window]]\nname = "a"\n', "unknown top-level key", id="unknown-top-level"),
        pytest.param('windows = "a"\n', "array of tables", id="windows-not-array"),
        pytest.param('windows = [1]\n', "window #1: expected a table", id="window-not-table"),
    ],
)
def test_bad_file_error_names_the_file_window_and_field(tmp_path: Path, text, words):
    path = tmp_path / "windows.toml"
    path.write_text(text)
    with pytest.raises(InvalidWindow) as caught:
        WindowsFile(tmp_path).load()
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert words in message
    assert "\n" not in message


def test_missing_file_is_no_windows(tmp_path: Path):
    assert WindowsFile(tmp_path).load() == []


def test_add_refuses_a_duplicate_and_remove_an_unknown_name_leaving_the_file_as_it_was(tmp_path: Path):
    windows_file = WindowsFile(tmp_path)
    windows_file.add(Window.parse(GOOD))
    before = windows_file.path.read_bytes()
    with pytest.raises(InvalidWindow, match="already exists"):
        windows_file.add(Window.parse(with_(duration="2h")))
    with pytest.raises(InvalidWindow, match="no such window"):
        windows_file.remove("other")
    assert windows_file.path.read_bytes() == before
    windows_file.add(Window.parse(with_(duration="2h")), replace=True)
    assert windows_file.load()[0].duration == timedelta(hours=2)
    assert windows_file.remove("nightly").name == "nightly"
    assert windows_file.load() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".windows.toml.lock", "windows.toml"]


def test_schema_describes_every_field():
    schema = WindowsDocument.model_json_schema()
    props = schema["$defs"]["Window"]["properties"]
    assert set(props) == set(Window.model_fields)
    assert props["duration"]["type"] == "string"
    assert schema["$defs"]["Window"]["additionalProperties"] is False
