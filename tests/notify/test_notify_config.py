"""`[[notify]]` validation: a bad table is refused with one line naming file, table and field."""

from __future__ import annotations

import logging
import os
from datetime import timedelta

import pytest
from notify_helpers import command, webhook, write_config

from hermes_estop.model.homes import Layout
from hermes_estop.notify.config import (
    CommandTarget,
    InvalidNotify,
    WebhookTarget,
    load_targets,
)
from hermes_estop.process.fleet_config import store_spec


def test_a_valid_config_gives_typed_targets_with_defaults(fleet_root):
    write_config(fleet_root, webhook("hook", "http://127.0.0.1:1/x", secret="s", stale_after="30m", timeout="5s"),
                 command("pager", ["/bin/true"], events=["engage", "stale"], scopes=["fleet", "ops"]))
    hook, pager = load_targets(fleet_root)
    assert isinstance(hook, WebhookTarget) and isinstance(pager, CommandTarget)
    assert hook.stale_after == timedelta(minutes=30) and hook.timeout == 5.0
    assert hook.events == ("engage", "rearm", "release", "expire", "retire", "skip", "stale", "task-start", "task-end",
                           "override", "refused")  # issue 37: an override is notified
    assert pager.wants("engage", "ops") and not pager.wants("release", "ops") and not pager.wants("engage", "dev")
    assert pager.stale_after == timedelta(hours=4)


@pytest.mark.parametrize(("table", "names"), [
    ('[[notify]]\nname = "x"\ntype = "email"\n', ["#1 (x)", "'type'", "email"]),
    (webhook("x", "ftp://host/"), ["#1 (x)", "'url'", "ftp://host/"]),
    (webhook("x", "http://h/", events=["engage", "explode"]), ["'events'", "explode"]),
    (webhook("x", "http://h/", events=[]), ["'events'"]),
    (webhook("x", "http://h/", timeout=-1), ["'timeout'"]),
    (webhook("x", "http://h/", stale_after="soon"), ["'stale_after'", "soon"]),
    (webhook("x", "http://h/", before="0s"), ["'before'", "0s"]),
    (webhook("x", "http://h/", before="8d"), ["'before'", "8d"]),
    (webhook("x", "http://h/", colour="red"), ["'colour'"]),
    (webhook("bad name", "http://h/"), ["'name'", "bad name"]),
    (command("x", []), ["'argv'"]),
    ('[[notify]]\ntype = "command"\nargv = ["a"]\n', ["#1", "'name'"]),
    (webhook("x", "http://h/") + 'headers = { "Bad Header" = "v" }\n', ["'headers'", "Bad Header"]),
])
def test_a_bad_table_is_refused_with_one_line_naming_file_table_and_field(fleet_root, table, names):
    path = write_config(fleet_root, webhook("good", "http://h/") if "#1" not in names[0] else "", table)
    with pytest.raises(InvalidNotify) as caught:
        load_targets(fleet_root)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    for name in names:
        assert name in message.replace("#2", "#1")


def test_duplicate_names_are_refused(fleet_root):
    write_config(fleet_root, webhook("x", "http://h/"), command("x", ["true"]))
    with pytest.raises(InvalidNotify, match="#2 \\(x\\): field 'name': duplicate"):
        load_targets(fleet_root)


def test_a_fifo_config_is_refused_without_hanging(fleet_root):
    os.mkfifo(fleet_root / "estop.toml")
    with pytest.raises(InvalidNotify, match="FIFO"):
        load_targets(fleet_root)


def test_notify_is_a_known_key_of_estop_toml(fleet_root, caplog):
    write_config(fleet_root, 'store = "file"\n', webhook("x", "http://h/"))
    with caplog.at_level(logging.WARNING, logger="hermes_estop"):
        assert store_spec(Layout(fleet_root, fleet_root), env={}) == "file"
    assert "notify" not in caplog.text
