"""A bug in the PostgreSQL threads is not an outage (issue 14 item 6): the driver's and the OS's
errors are outages (reconnect quietly, reads held after the grace), anything else is logged with
its traceback, and the process still fails safe: reads held, not the leader."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest

from hermes_estop.stores.pg_cache import Listener
from hermes_estop.stores.pg_clock import DbClock
from hermes_estop.stores.pg_leader import Leadership


def broken_connect(error: BaseException):
    def connect(role: str) -> Any:
        raise error

    return connect


@pytest.mark.parametrize("error, traceback_logged", [
    (TypeError("a bug in our code"), True),
    (psycopg.OperationalError("connection refused"), False),
    (ConnectionRefusedError(111, "Connection refused"), False),
])
def test_listener_logs_a_bug_with_its_traceback_and_stays_held(error, traceback_logged, caplog):
    listener = Listener(broken_connect(error), "hermes_estop", DbClock(), grace=1.0, connect_timeout=1.0)
    try:
        with caplog.at_level(logging.INFO, logger="hermes_estop"):
            rows, problem = listener.view()
        assert problem is not None and "unreachable" in problem
        assert not rows
        logged_tracebacks = [record for record in caplog.records if record.exc_info]
        assert bool(logged_tracebacks) is traceback_logged
    finally:
        listener.stop()


@pytest.mark.parametrize("error, traceback_logged", [
    (TypeError("a bug in our code"), True),
    (psycopg.OperationalError("connection refused"), False),
])
def test_leadership_logs_a_bug_with_its_traceback_and_does_not_lead(error, traceback_logged, caplog):
    leadership = Leadership(broken_connect(error), "hermes_estop", "windows", poll=0.2, connect_timeout=1.0)
    try:
        with caplog.at_level(logging.INFO, logger="hermes_estop"):
            leadership.start()
        assert not leadership.is_leader()
        assert leadership.last_error is not None and str(error) in leadership.last_error
        logged_tracebacks = [record for record in caplog.records if record.exc_info]
        assert bool(logged_tracebacks) is traceback_logged
    finally:
        leadership.stop()
