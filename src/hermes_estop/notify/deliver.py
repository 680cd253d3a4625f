"""Sending one event to one target: an HTTP POST (success: a 2xx) or a command with the event
on stdin (success: its exit 0, in a process group of its own that is killed whole when it exits or
times out: `processes.run_group`). Anything else raises `DeliveryFailed` with one printable line;
the caller retries later. Never follows a redirect (a POST must not turn into a GET elsewhere).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from typing import Any

from hermes_estop import __version__
from hermes_estop.model.text import one_line
from hermes_estop.notify.config import CommandTarget, WebhookTarget
from hermes_estop.system.processes import GroupTimeout, run_group

__all__ = ["SIGNATURE_HEADER", "DeliveryFailed", "deliver", "encode_event", "sign", "verify"]

SIGNATURE_HEADER = "X-Hermes-Signature"


class DeliveryFailed(Exception):
    """One attempt failed; the message is one printable line saying why."""


def encode_event(body: dict[str, Any]) -> bytes:
    """The exact bytes sent (and signed)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def sign(secret: str, body: bytes) -> str:
    """The value of `X-Hermes-Signature`: `sha256=<hex HMAC-SHA256 of the exact body>`."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """What a receiver does: constant-time comparison of the header with the body's signature."""
    return header is not None and hmac.compare_digest(sign(secret, body), header)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _post(target: WebhookTarget, body: bytes, event: dict[str, Any]) -> None:
    headers = {"User-Agent": f"hermes-estop/{__version__}", **target.headers,
               "Content-Type": "application/json", "X-Hermes-Event": str(event.get("event")),
               "X-Hermes-Event-Id": str(event.get("id"))}
    if target.secret is not None:
        headers[SIGNATURE_HEADER] = sign(target.secret, body)
    request = urllib.request.Request(target.url, data=body, headers=headers, method="POST")  # noqa: S310 - notify config admits http(s) URLs only
    try:
        with _OPENER.open(request, timeout=target.timeout) as response:
            status = response.status
            response.read(65536)
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"HTTP {exc.code} {one_line(exc.reason)}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DeliveryFailed(one_line(reason)) from None
    if not 200 <= status < 300:
        raise DeliveryFailed(f"HTTP {status}")


def _run(target: CommandTarget, body: bytes) -> None:
    try:
        result = run_group(target.argv, body, target.timeout)
    except GroupTimeout as exc:
        raise DeliveryFailed(str(exc)) from None
    except OSError as exc:
        raise DeliveryFailed(f"cannot run {one_line(target.argv[0])}: {one_line(exc.strerror or exc)}") from None
    if result.returncode != 0:
        tail = one_line(result.stderr.decode("utf-8", "replace")) if result.stderr else ""
        raise DeliveryFailed(f"exit {result.returncode}" + (f": {tail}" if tail else ""))


def deliver(target: WebhookTarget | CommandTarget, event: dict[str, Any]) -> None:
    """Send `event` to `target` once; `DeliveryFailed` when it was not accepted."""
    body = encode_event(event)
    if isinstance(target, WebhookTarget):
        _post(target, body, event)
    else:
        _run(target, body)
