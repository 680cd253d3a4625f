"""Leader election on PostgreSQL (`stores.pg_leader`): one of several campaigners leads, a
standby takes over when the leader steps down or its session is killed, and a step-down frees
the lock for the others. The SIGKILL of a whole scheduler process is in
`tests/windows/test_pg_scheduler_ha.py`."""

from __future__ import annotations

import pytest

from hermes_estop.stores.postgresql import PostgresStore
from pg_helpers import pg_server, pg_url  # noqa: F401

pytestmark = pytest.mark.postgresql

POLL = 0.1
BOUND = 10.0  # a correctness bound for a loaded machine; the takeover itself is about POLL


@pytest.fixture
def campaigners(pg_url):  # noqa: F811
    """Three processes' worth of stores (own connections each), campaigning for "windows"."""
    stores = [PostgresStore(pg_url, share=False) for _ in range(3)]
    stores[0].init_schema()
    yield [store.leadership("windows", poll=POLL) for store in stores]
    for store in stores:
        store.close()


def leaders(campaigners) -> list[int]:
    return [i for i, c in enumerate(campaigners) if c.is_leader()]


def wait_for_one_leader(campaigners, excluding=()) -> int:
    for _ in range(int(BOUND / POLL)):
        current = [i for i in leaders(campaigners) if i not in excluding]
        if len(current) == 1 and not set(leaders(campaigners)) & set(excluding):
            return current[0]
        campaigners[0].wait(True, POLL)
    raise AssertionError(f"no single leader within {BOUND}s: {leaders(campaigners)}")


def test_exactly_one_of_several_campaigners_leads(campaigners):
    wait_for_one_leader(campaigners)
    for _ in range(10):
        assert len(leaders(campaigners)) == 1
        campaigners[0].wait(False, POLL)


def test_a_standby_takes_over_when_the_leader_steps_down(campaigners):
    first = wait_for_one_leader(campaigners)
    campaigners[first].stop()
    assert not campaigners[first].is_leader()
    second = wait_for_one_leader(campaigners, excluding=(first,))
    assert second != first


def test_a_leader_whose_session_is_killed_steps_down_and_a_standby_takes_over(pg_server, campaigners):  # noqa: F811
    first = wait_for_one_leader(campaigners)
    with pg_server.admin() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [campaigners[first].backend_pid])
    assert campaigners[first].wait(False, BOUND)
    wait_for_one_leader(campaigners)


def test_different_roles_are_elected_independently(pg_url):  # noqa: F811
    store = PostgresStore(pg_url, share=False)
    other = PostgresStore(pg_url, share=False)
    try:
        assert store.leadership("windows", poll=POLL).wait(True, BOUND)
        assert other.leadership("reports", poll=POLL).wait(True, BOUND)
        assert not other.leadership("windows", poll=POLL).wait(True, 3 * POLL)
    finally:
        store.close()
        other.close()
