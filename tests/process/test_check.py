"""The predicate's notice (issue 15 items 1-2): an unreadable hold is named with its cause and
what will actually lift it, in one printable line."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hermes_estop import Estop
from hermes_estop.model.hold import Cause, Fence, Hold, HoldState, Reading
from hermes_estop.model.homes import Layout
from hermes_estop.model.text import unsafe_char
from hermes_estop.process.check import Snapshot, pause_notice
from hermes_estop.stores.unavailable import UnavailableStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def one_line(notice: str | None) -> str:
    assert notice is not None and "\n" not in notice and unsafe_char(notice) is None
    return notice


def notice_of(estop: Estop) -> str:
    verdict = estop.gate("42")
    assert not verdict
    return one_line(verdict.notice)


def test_a_directory_sentinel_says_remove_it_by_hand(tmp_path):
    (tmp_path / "ESTOP").mkdir()
    notice = notice_of(Estop(home=tmp_path))
    assert f"ESTOP at {tmp_path / 'ESTOP'} is a directory: remove it by hand" in notice
    assert "hermes resume" not in notice


def test_a_fifo_sentinel_says_remove_it_by_hand(tmp_path):
    os.mkfifo(tmp_path / "ESTOP")
    assert "is a FIFO: remove it by hand" in notice_of(Estop(home=tmp_path))


def test_a_socket_sentinel_says_remove_it_by_hand(tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "ESTOP"))
        assert "is a socket: remove it by hand" in notice_of(Estop(home=tmp_path))


def test_an_unreachable_store_says_held_until_it_is_back(tmp_path):
    estop = Estop(home=tmp_path, store=UnavailableStore("connection refused"))
    notice = notice_of(estop)
    assert "the fleet store is unreachable; held until it is back" in notice
    assert "connection refused" in notice and "hermes resume" not in notice


def test_a_postgresql_outage_reads_as_the_store_unreachable():
    location = Layout(home=Path("/r"), root=Path("/r")).fleet
    reading = Reading(location, HoldState.UNREADABLE, None, Fence(),
                      "PostgreSQL store unreachable since 12:00 (timeout): held until it answers again", Cause.STORE_DOWN)
    assert "the fleet store is unreachable" in one_line(pause_notice(Snapshot((reading,), NOW)))


@pytest.mark.parametrize("cause, advice", [
    (Cause.STORE_DOWN, "the fleet store is unreachable"),
    (Cause.NOT_A_FILE, ": remove it by hand"),
    (Cause.CANNOT_READ, "fix its permissions"),
    (Cause.BODY, "`hermes resume` removes it"),
])
def test_the_advice_follows_the_cause_the_reader_found_not_the_wording(cause, advice):
    """Issue 19: an unreadable cause is a typed value carried from where it was found; a body
    whose problem text merely looks like another cause gets its own cause's advice."""
    location = Layout(home=Path("/r"), root=Path("/r")).fleet
    misleading = "a directory; PostgreSQL store unavailable; cannot open"
    reading = Reading(location, HoldState.UNREADABLE, None, Fence(), misleading, cause)
    notice = one_line(pause_notice(Snapshot((reading,), NOW)))
    assert advice in notice
    others = {"the fleet store is unreachable", ": remove it by hand", "fix its permissions", "`hermes resume` removes it"}
    assert not any(other in notice for other in others - {advice})


def test_an_unreadable_reading_defaults_to_a_body_cause():
    location = Layout(home=Path("/r"), root=Path("/r")).fleet
    assert Reading(location, HoldState.UNREADABLE, None, Fence(), "empty body").cause is Cause.BODY
    assert Reading(location, HoldState.ACTIVE, Hold("g"), Fence("g")).cause is None


@pytest.mark.parametrize("raw", [b"{not json", b"[1]"])
def test_an_unreadable_body_says_resume_removes_it(tmp_path, raw):
    (tmp_path / "ESTOP").write_bytes(raw)
    notice = notice_of(Estop(home=tmp_path))
    assert "is unreadable" in notice and "`hermes resume` removes it" in notice


def test_an_empty_body_is_a_hand_made_stop_that_holds_and_admits_nobody(tmp_path):
    (tmp_path / "ESTOP").write_bytes(b"")
    estop = Estop(home=tmp_path)
    verdict = estop.gate(user_id="424242")
    assert not verdict and verdict.engaged
    notice = notice_of(estop)
    assert "a hand-made stop with no details" in notice and "`hermes resume` lifts it" in notice
    assert "unreadable" not in notice


def test_a_refused_profile_home_names_the_bad_home(tmp_path):
    home = tmp_path / "r" / "profiles" / "fleet"
    notice = notice_of(Estop(home=home))
    assert "is not a valid profile home" in notice and "'fleet'" in notice


def test_reasons_are_escaped_in_the_notice():
    location = Layout(home=Path("/r"), root=Path("/r")).fleet
    reading = Reading(location, HoldState.ACTIVE, Hold("g", reason="evil\x1b[2J\u202e"), Fence("g"))
    notice = one_line(pause_notice(Snapshot((reading,), NOW)))
    assert "evil\\x1b[2J\\u202e" in notice


def test_a_readable_hold_keeps_the_known_text(tmp_path):
    estop = Estop(home=tmp_path)
    estop.engage(reason="db migration")
    assert notice_of(estop) == ("Hermes is paused (db migration). New work is on hold; run `hermes resume` "
                                "to pick things back up.")
