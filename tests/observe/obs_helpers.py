"""Helpers of the observability tests (imported by name: this directory is on sys.path)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from hermes_estop.observe import StatusServer
from hermes_estop.windows import Window, WindowsFile

__all__ = ["fetch", "scrape", "write_windows"]


def write_windows(root: Path, *windows: dict[str, Any]) -> None:
    WindowsFile(root).save([Window.parse(w) for w in windows])


def fetch(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one real request; an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def scrape(server: StatusServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, headers, body = fetch(server.url + "metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples
