"""kanban: dispatch passes spawn nothing while held (cards stay ready), everything after the lift
up to the limit, the maintenance lane through the hold, and never one card twice."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections import Counter
from datetime import timedelta

import pytest

from hermes_estop import Allow, EstopError, StoreError
from hermes_estop.consumers.kanban import Board, Dispatcher, UnknownCard

from .helpers import T0, finishes


@pytest.fixture
def spawned(tmp_path):
    return tmp_path / "spawned.log"


@pytest.fixture
def board(root, clock):
    return Board(root, clock=clock)


def add_cards(board, spawned, count, *, owner=None, profile=None, ready=True):
    return [board.add(f"card {i}", f"echo $HERMES_KANBAN_CARD >> {spawned}", owner=owner, profile=profile,
                      ready=ready)
            for i in range(count)]


def statuses(board):
    return Counter(card.status for card in board.cards())


def test_held_passes_spawn_nothing_and_cards_stay_ready(fleet, board, spawned, appended):
    add_cards(board, spawned, 5)
    fleet.engage(reason="maintenance")
    dispatcher = Dispatcher(fleet, max_workers=10)
    for _ in range(3):
        report = dispatcher.dispatch(limit=10)
        assert (len(report.spawned), len(report.held)) == (0, 5)
        assert "maintenance" in report.held[0].notice
    assert statuses(board) == {"ready": 5}
    assert appended(spawned) == []


def test_after_the_lift_every_ready_card_spawns_up_to_the_limit(fleet, board, spawned, appended):
    cards = add_cards(board, spawned, 5)
    fleet.engage()
    dispatcher = Dispatcher(fleet, max_workers=3)
    assert dispatcher.dispatch(limit=3).spawned == ()
    fleet.release()
    first = dispatcher.dispatch(limit=3)
    assert (len(first.spawned), len(first.waiting), first.held) == (3, 2, ())
    second = dispatcher.dispatch(limit=3)
    assert len(second.spawned) == 2
    assert statuses(board) == {"done": 5}
    assert sorted(appended(spawned)) == sorted(str(card.id) for card in cards)


def test_todo_cards_are_not_dispatched_until_made_ready(fleet, board, spawned, appended):
    [card] = add_cards(board, spawned, 1, ready=False)
    dispatcher = Dispatcher(fleet)
    assert dispatcher.dispatch().spawned == ()
    board.mark_ready(card.id)
    assert dispatcher.dispatch().spawned == (card.id,)


@pytest.mark.parametrize(
    "allow, owner, profile, spawns",
    [
        (Allow.of(["op"], ["p1"]), "op", "p1", True),     # the maintenance lane
        (Allow.of(["op"], ["p1"]), "bob", "p1", False),   # wrong owner on the right profile
        (Allow.of(["op"], ["p1"]), "op", "p2", False),    # the operator on a profile the hold does not list
        (Allow.of(["op"], ["p1"]), "op", None, False),    # no profile where the hold narrows by profile
        (Allow.of(["op"]), "op", None, True),
        (Allow.of(["op"]), None, None, False),            # nobody's card
        (None, "op", "p1", False),                        # a hold without an allowlist admits nobody
    ],
)
def test_only_cards_the_allowlist_admits_spawn_through_the_hold(fleet, board, spawned, appended,
                                                                allow, owner, profile, spawns):
    [card] = add_cards(board, spawned, 1, owner=owner, profile=profile)
    fleet.engage(reason="window", allow=allow)
    report = Dispatcher(fleet).dispatch()
    assert report.spawned == ((card.id,) if spawns else ())
    assert board.get(card.id).status == ("done" if spawns else "ready")


def test_a_profile_hold_holds_only_that_profiles_cards(estop_for, fleet, board, spawned):
    held = board.add("p1 work", "true", profile="p1", ready=True)
    other = board.add("p2 work", "true", profile="p2", ready=True)
    unassigned = board.add("fleet work", "true", ready=True)
    estop_for("p1").engage(reason="p1 migration")
    report = Dispatcher(fleet).dispatch()
    assert [h.id for h in report.held] == [held.id]
    assert sorted(report.spawned) == [other.id, unassigned.id]


def test_a_dispatcher_started_in_a_profile_home_gates_unassigned_cards_on_the_fleet(p1, board, spawned):
    card = board.add("fleet work", "true", ready=True)
    p1.engage(reason="p1 only")
    assert Dispatcher(p1).dispatch().spawned == (card.id,)


def test_worker_results_are_recorded_done_or_failed(fleet, board):
    ok = board.add("ok", "true", ready=True)
    bad = board.add("bad", "echo nope; exit 4", ready=True)
    report = Dispatcher(fleet).dispatch()
    assert {run.id: run.result.status for run in report.finished} == {ok.id: "ok", bad.id: "failed"}
    assert board.get(ok.id).status == "done"
    failed = board.get(bad.id)
    assert (failed.status, failed.exit_code) == ("failed", 4)
    assert "nope" in failed.detail
    assert report.to_json()["failed"] == 1


def test_max_workers_bounds_the_workers_in_flight(fleet, board, tmp_path):
    gate_file = tmp_path / "go"
    for i in range(3):
        board.add(f"slow {i}", f"while [ ! -e {gate_file} ]; do sleep 0.02; done", ready=True)
    dispatcher = Dispatcher(fleet, max_workers=2)
    assert len(dispatcher.tick().spawned) == 2
    assert (dispatcher.tick().spawned, len(dispatcher.tick().waiting)) == ((), 1)
    gate_file.touch()
    assert len(dispatcher.drain(timeout=120)) == 2
    assert len(dispatcher.tick().spawned) == 1
    dispatcher.drain(timeout=120)
    assert statuses(board) == {"done": 3}


def test_a_running_card_whose_dispatcher_died_is_failed_after_its_deadline(fleet, board, clock):
    card = board.add("orphan", "true", ready=True)
    assert board.claim(card.id, "dead-dispatcher", clock.now, clock.now + timedelta(minutes=5))
    dispatcher = Dispatcher(fleet)
    clock.advance(minutes=5)
    assert dispatcher.tick().lost == ()
    clock.advance(minutes=2)
    assert dispatcher.tick().lost == (card.id,)
    assert board.get(card.id).status == "failed"


@pytest.fixture
def living():
    """A real process that stays alive for the test: a claimant or a worker that still runs."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def _rogue_claim(board, card_id, now, *, claim, pid=None, pid_start=None):
    """A claim made by SQL, not by a dispatcher: no deadline, perhaps a worker pid."""
    import sqlite3

    with sqlite3.connect(board.path) as db:
        db.execute("UPDATE cards SET status = 'running', claim = ?, started_at = ?, pid = ?, pid_start = ? "
                   "WHERE id = ?", (claim, now.isoformat(), pid, pid_start, card_id))


@pytest.mark.parametrize("form", ["token names the claimant", "worker recorded with its start", "worker pid only"])
def test_a_claim_the_dispatcher_did_not_make_is_never_lost_while_its_claimant_lives(fleet, board, clock, living,
                                                                                    form):
    from hermes_estop.system.processes import start_time

    card = board.add("rogue", "true")
    if form == "token names the claimant":
        _rogue_claim(board, card.id, clock.now, claim=f"{living.pid}-{start_time(living.pid)}-rogue")
    elif form == "worker recorded with its start":
        _rogue_claim(board, card.id, clock.now, claim="rogue", pid=living.pid, pid_start=start_time(living.pid))
    else:
        _rogue_claim(board, card.id, clock.now, claim="rogue", pid=living.pid)
    dispatcher = Dispatcher(fleet)
    clock.advance(hours=5)
    assert dispatcher.tick().lost == ()
    assert board.get(card.id).status == "running"
    living.kill()
    living.wait()
    lost = dispatcher.tick()
    assert lost.lost == (card.id,)
    after = board.get(card.id)
    assert after.status == "failed" and after.claim is not None  # the evidence `hermes doctor` names stays
    assert after.started_at is not None


def test_a_rogue_claim_with_nobody_alive_is_lost_only_a_grace_after_it_started(fleet, board, clock):
    card = board.add("rogue", "true")
    _rogue_claim(board, card.id, clock.now, claim="rogue")
    dispatcher = Dispatcher(fleet)
    assert dispatcher.tick().lost == ()
    clock.advance(minutes=2)
    assert dispatcher.tick().lost == (card.id,)
    assert board.get(card.id).claim == "rogue"


def test_a_finished_card_keeps_the_claim_that_names_its_dispatcher(fleet, board):
    from hermes_estop.consumers.board import claimant

    card = board.add("once", "true", ready=True)
    Dispatcher(fleet).dispatch()
    assert board.get(card.id).status == "done" and claimant(board.get(card.id).claim) == os.getpid()


def test_claim_is_conditional_on_the_card_being_ready(board, clock):
    card = board.add("once", "true", ready=True)
    assert board.claim(card.id, "a", clock.now, clock.now + timedelta(hours=1))
    assert not board.claim(card.id, "b", clock.now, clock.now + timedelta(hours=1))
    assert board.get(card.id).status == "running"


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"title": ""}, "''"),
        ({"command": "  "}, "'  '"),
        ({"profile": "../x"}, "../x"),
        ({"owner": "two words"}, "two words"),
        ({"owner": "op\u202e"}, "op\\u202e"),
        ({"owner": "op\x1b[2J"}, "op\\x1b[2J"),
    ],
)
def test_bad_card_input_is_refused_naming_the_value(board, kwargs, named):
    args = {"title": "t", "command": "true"}
    args.update(kwargs)
    with pytest.raises(EstopError) as raised:
        board.add(args.pop("title"), args.pop("command"), **args)
    assert named in str(raised.value)
    assert board.cards() == []


def test_unknown_card_is_refused(board):
    with pytest.raises(UnknownCard, match="42"):
        board.mark_ready(42)


def test_the_board_is_one_sqlite_file_in_the_fleet_root_in_wal_mode(root, board, estop_for):
    board.add("t", "true")
    assert board.path == root / "kanban.db"
    assert Board(estop_for("p2").layout.root).cards()[0].title == "t"
    import sqlite3

    with sqlite3.connect(board.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_DISPATCHER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from hermes_estop import Estop, FileStore
    from hermes_estop.consumers.kanban import Dispatcher
    root, go = Path(sys.argv[1]), Path(sys.argv[2])
    dispatcher = Dispatcher(Estop(home=root, root=root, store=FileStore(root)), max_workers=50)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    report = dispatcher.dispatch(limit=50)
    print(json.dumps({"spawned": list(report.spawned), "taken": list(report.taken)}), flush=True)
""")


@pytest.mark.slow
def test_two_dispatcher_processes_never_spawn_one_card_twice(root, board, spawned, tmp_path, python,
                                                             subprocess_env, appended):
    cards = add_cards(board, spawned, 30)
    go = tmp_path / "go"
    procs = [subprocess.Popen([python, "-c", _DISPATCHER, str(root), str(go)], stdout=subprocess.PIPE, text=True,
                              env=subprocess_env) for _ in range(2)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    go.touch()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        reports.append(json.loads(out))
    first, second = (set(report["spawned"]) for report in reports)
    assert first.isdisjoint(second)
    assert first | second == {card.id for card in cards}
    assert Counter(appended(spawned)) == Counter(str(card.id) for card in cards)
    assert statuses(board) == {"done": 30}


def test_started_at_is_the_pass_time(fleet, board, clock):
    card = board.add("t", "true", ready=True)
    clock.set(T0 + timedelta(hours=2))
    Dispatcher(fleet).dispatch()
    assert board.get(card.id).started_at == T0 + timedelta(hours=2)


def _hand_edit(board, card_id, **columns):
    import sqlite3

    with sqlite3.connect(board.path) as db:
        for column, value in columns.items():
            db.execute(f"UPDATE cards SET {column} = ? WHERE id = ?", (value, card_id))


@pytest.mark.parametrize("bad_profile", ["../escape", "fleet", "two words", ""])
def test_a_hand_edited_card_with_an_invalid_profile_is_parked_and_the_pass_goes_on(fleet, board, spawned, appended,
                                                                                   bad_profile):
    first, bad, last = add_cards(board, spawned, 3)
    _hand_edit(board, bad.id, profile=bad_profile)
    report = Dispatcher(fleet).dispatch()
    assert sorted(report.spawned) == [first.id, last.id]
    assert sorted(appended(spawned)) == sorted([str(first.id), str(last.id)])
    parked = board.get(bad.id)
    assert parked.status == "failed" and repr(bad_profile) in parked.detail
    assert {run.id: run.result.status for run in report.failed} == {bad.id: "error"}
    assert Dispatcher(fleet).dispatch().finished == ()  # parked, not retried every pass


@pytest.mark.parametrize("planted, what", [("kanban.db", "FIFO"), ("kanban.db-wal", "FIFO"),
                                           ("kanban.db", "directory")])
def test_a_fifo_or_directory_at_the_board_is_refused_in_one_line_and_never_blocks(root, fleet, board, planted, what):
    if planted != "kanban.db":
        board.add("t", "true", ready=True)
    path = root / planted
    if path.exists():
        path.unlink()
    os.mkfifo(path) if what == "FIFO" else path.mkdir()
    for call in (lambda: Dispatcher(fleet).tick(), board.cards):
        kind, error = finishes(call)
        assert kind == "raised" and isinstance(error, StoreError), error
        assert str(path) in str(error) and what in str(error) and "\n" not in str(error)


def test_a_fifo_at_a_cards_log_fails_that_card_and_never_blocks(fleet, board):
    card = board.add("t", "true", ready=True)
    board.log_dir.mkdir(parents=True)
    os.mkfifo(board.log_dir / f"{card.id}.log")
    kind, _ = finishes(lambda: Dispatcher(fleet).dispatch())
    assert kind == "returned"
    assert board.get(card.id).status == "failed" and "FIFO" in board.get(card.id).detail


def test_the_schema_script_runs_once_per_board_not_per_statement(board, monkeypatch):
    import sqlite3

    scripts = []
    real_connect = sqlite3.connect

    class Counting(sqlite3.Connection):
        def executescript(self, script):
            scripts.append(script)
            return super().executescript(script)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: real_connect(*a, factory=Counting, **kw))
    card = board.add("t", "true")
    for _ in range(5):
        board.get(card.id)
        board.cards("ready")
    assert len(scripts) == 1


@pytest.mark.parametrize("present", [False, True], ids=["no board file", "an empty board file"])
def test_reading_a_board_nobody_wrote_finds_no_card_and_writes_nothing(tmp_path, clock, present):
    root = tmp_path / "fleet"
    if present:
        root.mkdir()
        (root / "kanban.db").touch()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    board = Board(root, clock=clock)
    assert board.cards() == [] and board.cards("ready") == []
    with pytest.raises(UnknownCard):
        board.get(1)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    if present:
        assert (root / "kanban.db").stat().st_size == 0
