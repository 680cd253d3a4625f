"""The wire of the write API (`/api/v1/`), shared by the server that reads the request off the
socket (`observe.server`) and the routes that answer it (`api.routes`): one request, one answer,
the JSON error answer, and the largest body either reads (64 KiB)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hermes_estop.model.text import one_line

__all__ = ["MAX_BODY", "ApiRequest", "ApiResponse", "error_response"]

MAX_BODY = 64 * 1024


@dataclass
class ApiRequest:
    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    remote: str
    #: the query string, undecoded (`user=alice&profile=ops`)
    query: str = ""


@dataclass
class ApiResponse:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body, indent=1, default=str).encode() + b"\n"


def error_response(status: int, message: str, **extra: Any) -> ApiResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="hermes"'} if status == 401 else {}
    if status == 429:
        headers["Retry-After"] = "60"
    return ApiResponse(status, {"error": one_line(message), "status": status, **extra}, headers)
