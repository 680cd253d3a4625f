"""gateway: the turn gate of a chat gateway, its in-band control commands, and a small
line-oriented loopback server to exercise both with a real client (docs/design.md §7).

A turn from an admitted principal is served; any other turn while held gets the pause notice
(the reason, and the auto-resume time when there is one). Control commands — `/status`,
`/pause [reason]`, `/resume` — are never blocked by the pause (an operator must be able to lift it
from the chat), but they are authorized: only the gateway's configured operators may pause or
resume. An in-band `/pause <reason>` re-arms non-destructively: it supplies only a reason, so the
standing allowlist (the operator's own exemption) and deadman survive it.

The line protocol: one `user_id profile text` line in (`-` for no profile), one reply line out,
`<kind>: <text>` where kind is `served`, `held`, `ok`, `denied` or `error`.
"""

from __future__ import annotations

import logging
import socket
import socketserver
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hermes_estop.consumers.passgate import gate_work
from hermes_estop.consumers.turns import TurnLedger
from hermes_estop.consumers.validate import validate_owner
from hermes_estop.model.errors import EstopError, InvalidArgument
from hermes_estop.model.netaddr import is_loopback
from hermes_estop.model.text import one_line, printable
from hermes_estop.model.timeutil import display_instant
from hermes_estop.process.check import pause_notice
from hermes_estop.process.estop import Estop

__all__ = [
    "CONTROL_COMMANDS",
    "MAX_LINE",
    "Gateway",
    "LineServer",
    "Reply",
    "echo_responder",
    "gateway_actor",
    "is_loopback",
    "parse_line",
]

logger = logging.getLogger("hermes_estop.gateway")
#: what this consumer gates as, for scoped holds (`hermes pause --only gateway`)
COMPONENT = "gateway"

CONTROL_COMMANDS = ("/status", "/pause", "/resume")
MAX_LINE = 64 * 1024
NO_PROFILE = "-"

#: (user_id, profile, text) -> the reply to a served turn
Responder = Callable[[str | None, str | None, str], str]


def echo_responder(user_id: str | None, profile: str | None, text: str) -> str:
    """The reference gateway's "agent": it acknowledges the turn it was given."""
    return f"ack {text}" if text else "ack"


@dataclass(frozen=True)
class Reply:
    """`kind`: served (the turn ran), held (refused with the notice), ok (a control command
    did its job), denied (a control command from a non-operator), error."""

    kind: str
    text: str

    def __post_init__(self) -> None:
        # Everything but a served turn's answer is built from reasons, ids and notices that may
        # have been written by hand: a chat user sees control characters escaped, never raw.
        if self.kind != "served":
            object.__setattr__(self, "text", printable(self.text))

    def __bool__(self) -> bool:
        return self.kind in ("served", "ok")

    def line(self) -> str:
        """The reply as one line a chat user sees: control characters and bidirectional
        overrides (from a reason written by hand, say) escaped, never passed on raw."""
        return f"{self.kind}: {one_line(self.text)}"


def _control(text: str) -> tuple[str, str] | None:
    stripped = text.strip()
    word, _, rest = stripped.partition(" ")
    if word.lower() in CONTROL_COMMANDS:
        return word.lower(), rest.strip()
    return None


class Gateway:
    """The turn gate over one `Estop` (the gateway's home). `operators` are the user ids allowed
    to pause and resume; `respond` serves an admitted turn."""

    def __init__(self, estop: Estop, *, operators: Iterable[Any] = (), respond: Responder | None = None,
                 turns: TurnLedger | None = None) -> None:
        self.estop = estop
        self.operators = frozenset(op for op in (validate_owner(o) for o in operators) if op is not None)
        self.respond: Responder = respond or echo_responder
        #: the turns in flight, visible to `hermes drain` and `hermes status`
        self.turns = turns if turns is not None else TurnLedger(estop.layout.home, estop.clock)

    def is_operator(self, user_id: object) -> bool:
        return user_id is not None and str(user_id).strip() in self.operators

    def handle(self, user_id: object, profile: str | None, text: str) -> Reply:
        """A turn or a control command from `user_id` for `profile`."""
        user = None if user_id is None else str(user_id).strip() or None
        where = None if profile is None else str(profile).strip() or None
        control = _control(text)
        if control is not None:
            return self._command(user, where, *control)
        try:
            verdict = gate_work(self.estop, user, where, COMPONENT)
        except InvalidArgument as exc:
            return Reply("error", str(exc))
        if not verdict:
            return Reply("held", verdict.notice or "Hermes is paused.")
        with self.turns.track(user, where):
            return Reply("served", self.respond(user, where, text))

    def _command(self, user: str | None, profile: str | None, command: str, argument: str) -> Reply:
        if command == "/status":
            return self._status(user, profile)
        if not self.is_operator(user):
            logger.warning("gateway: %s from %s refused: not an operator", command, printable(repr(user)))
            return Reply("denied", f"{command} is for operators only; {user or 'anonymous'} is not one")
        assert user is not None
        try:
            if command == "/pause":
                return self._pause(user, argument)
            return self._resume(user)
        except EstopError as exc:
            return Reply("error", f"{command} failed: {exc}")

    def _status(self, user: str | None, profile: str | None) -> Reply:
        try:
            verdict = gate_work(self.estop, user, profile, COMPONENT)
        except InvalidArgument as exc:
            return Reply("error", str(exc))
        snapshot = verdict.snapshot
        if not verdict.engaged:
            scoped = len(snapshot.scoped_active)
            return Reply("ok", "not paused: new work runs" if not scoped
                         else f"turns are not paused ({scoped} scoped hold(s) pause other work)")
        scopes = ", ".join(r.location.describe() for r in verdict.holds)
        yours = "your turns are served (exempt)" if verdict.admitted else "your turns are held"
        return Reply("ok", f"paused by {scopes}. {pause_notice(snapshot, verdict.holds)} ({yours})")

    def acting_as(self, user: str) -> Estop:
        """The gateway's `Estop` writing as the authenticated principal that asked: the audit
        actor (and a hold's `armed_by`) of every write the gateway makes is
        `gateway:<id>@<host>`, never the account the gateway runs under."""
        return self.estop.acting_as(gateway_actor(user))

    def _pause(self, user: str, reason: str) -> Reply:
        # Only the reason: the standing allowlist and deadline are kept (non-destructive re-arm).
        hold = self.acting_as(user).engage(reason=reason or None)
        location = self.estop.location()
        logger.warning("gateway: %s paused %s (generation %s)", user, location.describe(), hold.generation)
        deadline = display_instant(hold.expires_at) if hold.expires_at else "none"
        allowed = ", ".join(sorted(hold.allow.user_ids)) or "nobody"
        return Reply("ok", f"paused {location.describe()}: reason {hold.reason or '(none)'}; "
                           f"auto-resumes {deadline}; exempt {allowed}")

    def _resume(self, user: str) -> Reply:
        location = self.estop.location()
        removed = self.acting_as(user).release()
        still = [r.location.describe() for r in self.estop.snapshot().active]
        tail = f"; still held by {', '.join(still)}" if still else ""
        if removed is None:
            return Reply("ok", f"no hold at {location.describe()}{tail}")
        generation = removed.hold.generation if removed.hold is not None else None
        logger.warning("gateway: %s resumed %s (generation %s)", user, location.describe(), generation)
        return Reply("ok", f"resumed {location.describe()}{tail}")

    def handle_line(self, line: str) -> str:
        """One protocol line in, one reply line out."""
        try:
            user, profile, text = parse_line(line)
        except InvalidArgument as exc:
            return Reply("error", str(exc)).line()
        return self.handle(user, profile, text).line()


def gateway_actor(user_id: str) -> str:
    """The audit actor of a write a gateway makes for `user_id`: `gateway:<id>@<host>`."""
    return f"gateway:{user_id}@{socket.gethostname()}"


def parse_line(line: str) -> tuple[str, str | None, str]:
    """`user_id profile text` -> (user_id, profile or None for `-`, text)."""
    parts = line.strip().split(None, 2)
    if len(parts) < 2:
        raise InvalidArgument(f"bad line {line.strip()[:80]!r}: expected `user_id profile text` (profile `-` for none)")
    user, profile = parts[0], parts[1]
    return user, None if profile == NO_PROFILE else profile, parts[2] if len(parts) > 2 else ""


class _LineHandler(socketserver.StreamRequestHandler):
    timeout = 300

    def handle(self) -> None:
        server: LineServer = self.server  # type: ignore[assignment]
        while True:
            try:
                raw = self.rfile.readline(MAX_LINE + 1)
            except (TimeoutError, OSError):
                return
            if not raw:
                return
            if len(raw) > MAX_LINE:
                self._send(Reply("error", f"line longer than {MAX_LINE} bytes").line())
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line.strip():
                continue
            if not self._send(server.gateway.handle_line(line)):
                return

    def _send(self, reply: str) -> bool:
        try:
            self.wfile.write((reply + "\n").encode("utf-8"))
            self.wfile.flush()
            return True
        except OSError:
            return False


class LineServer(socketserver.ThreadingTCPServer):
    """The loopback line server around a `Gateway` (one thread per connection). Port 0 picks a
    free port; `address` says which."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, gateway: Gateway, host: str = "127.0.0.1", port: int = 0) -> None:
        self.gateway = gateway
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _LineHandler)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)
