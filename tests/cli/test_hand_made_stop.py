"""An empty ESTOP (`touch ESTOP`, "a valid emergency stop" in the README) is said to be a hand-made
stop with no details, never "unreadable": the words change, the hold does not (it holds, admits
nobody, and `hermes resume` lifts it)."""

from __future__ import annotations

import json

import pytest

#: the subject is each command's output, exit code and files: `hermes` runs in this process
HERMES_IN_PROCESS = True


@pytest.mark.parametrize("body", [b"", b"\n", b"  \n"])
def test_empty_estop_is_a_hand_made_stop_not_a_broken_one(hermes, body):
    hermes.home.mkdir(parents=True)
    hermes.sentinel.write_bytes(body)
    status = hermes("status", check=0)
    assert "hand-made stop with no details" in status.stdout
    assert "unreadable" not in status.stdout
    assert "lift       hermes resume" in status.stdout
    check = hermes("check", "--user", "424242", check=1)
    assert "hand-made stop with no details" in check.stdout
    assert "unreadable" not in check.stdout and "empty body" not in check.stdout
    data = json.loads(hermes("status", "--json", check=0).stdout)
    (hold,) = data["holds"]
    assert (hold["state"], hold["cause"]) == ("unreadable", "empty")  # fail safe: held, admits nobody
    resume = hermes("resume", check=0)
    assert resume.stdout.strip() == "resumed fleet (a hand-made stop with no details)"
    assert not hermes.sentinel.exists()


def test_a_broken_body_is_still_called_unreadable(hermes):
    hermes.home.mkdir(parents=True)
    hermes.sentinel.write_bytes(b"{")
    assert "unreadable" in hermes("check", check=1).stdout
    assert "removed an unreadable hold" in hermes("resume", check=0).stdout
