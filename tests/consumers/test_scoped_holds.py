"""Scoped holds against the real consumers (issue 26): a kanban-only hold leaves cron ticking and
stops every dispatch; a `--job nightly-*` hold holds only those jobs; a full hold and a scoped
hold released in either order leave the other standing. On both stores."""

from __future__ import annotations

import pytest

from hermes_estop import FileStore
from hermes_estop.consumers.cron import CronRunner
from hermes_estop.consumers.gateway import Gateway
from hermes_estop.consumers.kanban import Board, Dispatcher
from hermes_estop.consumers.scheduling import gated

from .helpers import at


@pytest.fixture(params=["file", "postgresql"])
def store(request, root):
    """Both hold stores (the cron table and the kanban board are files of the fleet root either way)."""
    if request.param == "file":
        yield FileStore(root)
        return
    from pg_helpers import PostgresBackend

    opened = PostgresBackend().open(root)
    yield opened
    opened.close()


@pytest.fixture
def board(root, clock):
    return Board(root, clock=clock)


def add_job(table, marker, name, *, profile="p1"):
    return table.add(name, f"echo {name} >> {marker}", now=at(10, 0), schedule="*/5 * * * *", profile=profile)


def add_card(board, spawned, title, profile=None):
    return board.add(title, f"echo $HERMES_KANBAN_CARD >> {spawned}", profile=profile, ready=True)


def test_a_kanban_only_hold_lets_cron_run_and_dispatch_claim_nothing(p1, fleet, clock, table, marker, appended,
                                                                     board, tmp_path):
    spawned = tmp_path / "spawned.log"
    add_job(table, marker, "report")
    add_card(board, spawned, "migrate")
    fleet.engage(reason="migrating kanban.db", only=["kanban"])
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert (report.executed, report.held) == (1, ())
    assert appended(marker) == ["report"]
    dispatched = Dispatcher(fleet).dispatch(limit=5)
    assert dispatched.spawned == () and len(dispatched.held) == 1
    assert "kanban: migrating kanban.db" in dispatched.held[0].notice
    assert [card.status for card in board.cards()] == ["ready"]


def test_a_nightly_job_hold_holds_only_those_jobs(p1, fleet, clock, table, marker, appended, board, tmp_path):
    for name in ("nightly-db", "nightly-logs", "hourly"):
        add_job(table, marker, name)
    add_card(board, tmp_path / "spawned.log", "nightly-cleanup")
    fleet.engage(reason="upstream down", jobs=["nightly-*"], only=["cron"])
    report = CronRunner(p1).tick(clock.set(at(10, 6)))
    assert sorted(h.name for h in report.held) == ["nightly-db", "nightly-logs"]
    assert appended(marker) == ["hourly"]
    assert table.get("nightly-db").next_run_at == at(10, 5)  # held: its next run does not move
    assert Dispatcher(fleet).dispatch(limit=5).held == ()  # a kanban card of that name is not cron work


def test_a_job_glob_matches_kanban_cards_by_assignee_or_title(fleet, board, tmp_path, estop_for):
    estop_for("ops")
    spawned = tmp_path / "spawned.log"
    by_title = add_card(board, spawned, "reindex search")
    by_profile = add_card(board, spawned, "anything", profile="ops")
    free = add_card(board, spawned, "other")
    fleet.engage(only=["kanban"], jobs=["reindex*", "ops"])
    report = Dispatcher(fleet, max_workers=5).dispatch(limit=5)
    assert sorted(h.id for h in report.held) == sorted([by_title.id, by_profile.id])
    assert report.spawned == (free.id,)


@pytest.mark.parametrize("first", ["full", "scoped"])
def test_full_and_scoped_holds_released_in_either_order_leave_the_other(p1, fleet, clock, table, marker, first):
    add_job(table, marker, "nightly-db")
    add_job(table, marker, "hourly")
    fleet.engage(reason="everything")
    scoped = fleet.engage(reason="nightly only", only=["cron"], jobs=["nightly-*"])
    runner = CronRunner(p1)
    assert {h.name for h in runner.tick(clock.set(at(10, 6))).held} == {"nightly-db", "hourly"}
    if first == "full":
        fleet.release()
        expected = {"nightly-db"}
    else:
        fleet.release(hold=scoped.hold_id)
        expected = {"nightly-db", "hourly"}
    assert {h.name for h in runner.tick(clock.set(at(10, 7))).held} == expected
    if first == "full":
        fleet.release(hold=scoped.hold_id)
    else:
        fleet.release()
    assert runner.tick(clock.set(at(10, 8))).held == ()


def test_a_gateway_only_hold_holds_turns_and_nothing_else(fleet, p1, clock, table, marker):
    add_job(table, marker, "report")
    fleet.engage(reason="chat maintenance", only=["gateway"])
    gateway = Gateway(p1)
    reply = gateway.handle("7", None, "hello")
    assert reply.kind == "held" and "gateway: chat maintenance" in reply.text
    assert CronRunner(p1).tick(clock.set(at(10, 6))).executed == 1


def test_an_apscheduler_job_is_held_by_its_job_id(fleet):
    calls = []
    nightly = gated(lambda: calls.append("nightly"), fleet, component="apscheduler", job="nightly-export")
    hourly = gated(lambda: calls.append("hourly"), fleet, component="apscheduler", job="hourly")
    fleet.engage(only=["apscheduler"], jobs=["nightly-*"])
    nightly()
    hourly()
    assert calls == ["hourly"] and nightly.skipped == 1
