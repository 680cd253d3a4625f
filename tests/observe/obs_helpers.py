"""Helpers of the observability tests (imported by name: this directory is on sys.path)."""

from __future__ import annotations

import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from hermes_estop.observe.server import StatusServer
from hermes_estop.windows.model import Window
from hermes_estop.windows.windows_file import WindowsFile

__all__ = ["Dom", "fetch", "scrape", "write_windows"]


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


class Dom(HTMLParser):
    """The elements of the rendered DOM as (tag, attributes, text of the element's own data)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, str]] = []
        self.stack: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = {"tag": tag, **{k: v or "" for k, v in attrs}, "text": "", "lane": ""}
        for parent in reversed(self.stack):
            if parent["tag"] == "g" and "lane" in parent.get("class", "").split():
                element["lane"] = parent.get("data-scope", "")
                break
        self.elements.append(element)
        if tag not in ("meta", "link", "br", "img", "input", "rect", "line", "path"):
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        if all(element["tag"] != tag for element in self.stack):
            return  # the end of an element never stacked (a rect, a line)
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self.stack:
            element["text"] += data

    def having(self, cls: str) -> list[dict[str, str]]:
        return [e for e in self.elements if cls in e.get("class", "").split()]
