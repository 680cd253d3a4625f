"""`unserved`: while a server is named, every command `--server` does not serve is refused
before it runs, however the command line spells it (issue 44 item 1: a command that would act
on this host's files instead of the server's fleet never runs silently)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from hermes_estop.cli.served import SERVED, SERVER_ENV, unserved

URL = "https://hermes.example:9477"


@pytest.mark.parametrize("args", [
    ("drain", "--fleet"),
    ("--", "drain", "--fleet"),
    ("--store", "file", "drain"),
    ("--store=file", "--", "drain"),
    ("--", "windows", "add", "later", "--cron", "0 3 * * *"),
    ("tokens", "create", "laptop"),
])
def test_a_command_not_served_is_refused_however_it_is_spelled(monkeypatch, args):
    monkeypatch.setenv(SERVER_ENV, URL)
    refusal = unserved(list(args))
    assert refusal is not None and "is not served over --server" in refusal
    assert refusal.split(" is not served", 1)[0] in ("hermes drain", "hermes windows add", "hermes tokens create")


@pytest.mark.parametrize("args", [
    ("check",), ("--", "check"), ("gate", "--", "drain"), ("run", "--fleet", "--", "drain"), ("windows", "next"),
    ("--", "history"), ("drain", "--help"), ("windows",),
])
def test_a_served_command_or_help_is_never_refused(monkeypatch, args):
    monkeypatch.setenv(SERVER_ENV, URL)
    assert unserved(list(args)) is None


def test_nothing_is_refused_without_a_server(monkeypatch):
    monkeypatch.delenv(SERVER_ENV, raising=False)
    assert unserved(["--", "drain", "--fleet"]) is None
    assert unserved(["--server", URL, "--", "drain"]) is not None


def test_the_server_options_help_names_every_command_it_serves():
    shown = subprocess.run([sys.executable, "-m", "hermes_estop", "--help"], capture_output=True, text=True,
                           timeout=120, check=True).stdout
    said = " ".join(shown.split("--server URL", 1)[1].split("--token-file", 1)[0].split())
    for command in sorted({words[0] for words in SERVED} - {"help", "windows"}):
        assert re.search(rf"\b{command}\b", said), (command, said)
    assert "windows list/next/skip/unskip" in said
