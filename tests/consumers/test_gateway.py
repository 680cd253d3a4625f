"""gateway: admitted turns are served, others get the pause notice; control commands pass the
pause but are authorized; an in-band /pause re-arms without losing the allowlist or deadman."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading

import pytest

from hermes_estop import Allow
from hermes_estop.consumers.gateway import Gateway, LineServer, is_loopback, parse_line


@pytest.fixture
def gateway(p1):
    return Gateway(p1, operators=["op"])


def test_exempt_principal_is_served_and_a_peer_gets_the_notice_with_the_resume_time(p1, gateway):
    hold = p1.engage(reason="db migration", allow=Allow.of(["op"]), ttl="45m")
    served = gateway.handle("op", "p1", "hello")
    assert (served.kind, served.text) == ("served", "ack hello")
    refused = gateway.handle("bob", "p1", "hello")
    assert refused.kind == "held"
    assert "db migration" in refused.text
    assert hold.expires_at.isoformat() in refused.text


def test_a_notice_without_a_deadman_says_no_resume_time(p1, gateway):
    p1.engage(reason="incident")
    refused = gateway.handle("bob", "p1", "hi")
    assert "incident" in refused.text and "Auto-resumes" not in refused.text


def test_a_hold_without_an_allowlist_admits_nobody_not_even_an_operator(p1, gateway):
    p1.engage(reason="stop everything")
    assert gateway.handle("op", "p1", "hello").kind == "held"


def test_a_turn_is_served_when_nothing_holds(gateway):
    assert gateway.handle("bob", None, "hello").kind == "served"


def test_a_fleet_hold_and_a_profile_allowlist_narrow_the_operator(fleet, p1, gateway):
    fleet.engage(reason="window", allow=Allow.of(["op"], ["p1"]))
    assert gateway.handle("op", "p1", "x").kind == "served"
    assert gateway.handle("op", "p2", "x").kind == "held"


@pytest.mark.parametrize("command", ["/status", "/pause more work", "/resume"])
def test_control_commands_from_an_operator_pass_while_paused(p1, gateway, command):
    p1.engage(reason="maintenance")
    reply = gateway.handle("op", "p1", command)
    assert reply.kind == "ok", reply.text
    assert p1.is_engaged() == (command != "/resume")


@pytest.mark.parametrize("command", ["/pause mine now", "/resume"])
def test_control_commands_are_refused_for_non_operators(p1, gateway, command):
    hold = p1.engage(reason="maintenance")
    reply = gateway.handle("bob", "p1", command)
    assert reply.kind == "denied"
    [standing] = p1.holds()
    assert standing.hold.generation == hold.generation and standing.hold.reason == "maintenance"


def test_a_non_operator_cannot_pause_a_free_fleet(p1, gateway):
    assert gateway.handle("bob", "p1", "/pause").kind == "denied"
    assert not p1.is_engaged()


def test_status_is_open_to_everyone_and_says_whether_the_asker_is_exempt(p1, gateway):
    assert gateway.handle("bob", "p1", "/status").text.startswith("not paused")
    p1.engage(reason="upgrade", allow=Allow.of(["op"]))
    mine = gateway.handle("op", "p1", "/status")
    theirs = gateway.handle("bob", "p1", "/status")
    assert mine.kind == theirs.kind == "ok"
    assert "upgrade" in theirs.text and "held" in theirs.text
    assert "exempt" in mine.text


def test_an_in_band_pause_keeps_the_allowlist_and_the_deadline(p1, gateway):
    before = p1.engage(reason="first", allow=Allow.of(["op"], ["p1"]), ttl="45m")
    reply = gateway.handle("op", "p1", "/pause  second   reason")
    assert reply.kind == "ok"
    [reading] = p1.holds()
    after = reading.hold
    assert after.generation != before.generation
    assert after.reason == "second reason"
    assert after.allow == before.allow
    assert after.expires_at == before.expires_at
    assert gateway.handle("op", "p1", "still working").kind == "served"


def test_an_in_band_pause_without_a_reason_keeps_the_reason(p1, gateway):
    p1.engage(reason="keep me", allow=Allow.of(["op"]))
    gateway.handle("op", "p1", "/pause")
    assert p1.holds()[0].hold.reason == "keep me"


def test_an_in_band_resume_says_what_still_holds(fleet, p1, gateway):
    fleet.engage(reason="fleet-wide")
    p1.engage(reason="mine")
    reply = gateway.handle("op", "p1", "/resume")
    assert reply.kind == "ok" and "still held by fleet" in reply.text
    assert [r.location.scope for r in p1.holds()] == ["fleet"]


@pytest.mark.parametrize(
    "line, parsed",
    [
        ("42 p1 hello there", ("42", "p1", "hello there")),
        ("42 - /status", ("42", None, "/status")),
        ("42 p1", ("42", "p1", "")),
    ],
)
def test_parse_line(line, parsed):
    assert parse_line(line) == parsed


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("::1", True), ("localhost", True),
                                            ("0.0.0.0", False), ("192.168.1.4", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def _converse(address, lines):
    with socket.create_connection(address, timeout=10) as sock:
        stream = sock.makefile("rw", encoding="utf-8", newline="\n")
        replies = []
        for line in lines:
            stream.write(line + "\n")
            stream.flush()
            replies.append(stream.readline().rstrip("\n"))
        return replies


def test_the_loopback_server_answers_one_line_per_line_over_a_real_socket(p1, gateway):
    server = LineServer(gateway, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        assert server.address[0] == "127.0.0.1"
        replies = _converse(server.address, [
            "bob p1 hello",
            "op p1 /pause db migration",
            "bob p1 hello again",
            "bob p1 /resume",
            "op p1 /resume",
            "bob p1 hello once more",
            "garbage",
        ])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert replies[0] == "served: ack hello"
    assert replies[1].startswith("ok: paused profile p1: reason db migration")
    assert replies[2].startswith("held: Hermes is paused (db migration)")
    assert replies[3].startswith("denied: ")
    assert replies[4] == "ok: resumed profile p1"
    assert replies[5] == "served: ack hello once more"
    assert replies[6].startswith("error: bad line 'garbage'")


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "inherited_sigint"), [
    (signal.SIGINT, signal.SIG_DFL),
    (signal.SIGTERM, signal.SIG_DFL),   # what systemd sends
    (signal.SIGINT, signal.SIG_IGN),    # started with `nohup ... &`: SIGINT ignored by inheritance
])
def test_hermes_gateway_serve_over_a_real_socket(p1, python, subprocess_env, sig, inherited_sigint):
    proc = subprocess.Popen([python, "-m", "hermes_estop", "gateway", "serve", "--port", "0", "--operator", "op"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, inherited_sigint))
    try:
        banner = proc.stdout.readline()
        assert banner.startswith("hermes gateway listening on 127.0.0.1:"), banner + proc.stderr.read()
        port = int(banner.split()[4].rsplit(":", 1)[1])
        replies = _converse(("127.0.0.1", port), ["op p1 /pause from chat", "bob p1 hi", "op p1 /status"])
        assert replies[0].startswith("ok: paused profile p1")
        assert replies[1].startswith("held: Hermes is paused (from chat)")
        assert replies[2].startswith("ok: paused by profile p1")
        assert p1.holds()[0].hold.reason == "from chat"
    finally:
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out.splitlines()[-1] == "hermes gateway stopped"


@pytest.mark.parametrize("command, event", [("/pause from chat", "engage"), ("/resume", "release")])
def test_every_gateway_write_is_audited_as_the_authenticated_principal(p1, gateway, command, event):
    if command == "/resume":
        p1.engage(reason="to lift")
    assert gateway.handle("op", "p1", command).kind == "ok"
    last = p1.history()[-1]
    assert (last.event, last.actor) == (event, f"gateway:op@{socket.gethostname()}")


def test_a_hold_paused_from_the_gateway_is_armed_by_the_principal(p1, gateway):
    gateway.handle("op", "p1", "/pause from chat")
    assert p1.holds()[0].hold.armed_by == f"gateway:op@{socket.gethostname()}"


def test_a_hand_written_reason_reaches_the_chat_user_escaped(p1, gateway):
    (p1.layout.home / "ESTOP").write_text(json.dumps({"generation": "g1", "reason": "\x1b[2Jwiped \u202eevil"}))
    for line in ("bob p1 hello", "bob p1 /status"):
        reply = gateway.handle_line(line)
        assert "\x1b" not in reply and "\u202e" not in reply
        assert "\\x1b[2Jwiped \\u202eevil" in reply
