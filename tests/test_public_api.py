"""The public surface is explicit: `__all__` is exactly what the manual's Python API page
(docs/python-api.md) promises."""

from __future__ import annotations

import re
from pathlib import Path

import hermes_estop

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def documented_names() -> list[str]:
    text = API_PAGE.read_text(encoding="utf-8")
    start = text.index("The public names (`hermes_estop.__all__`):")
    paragraph = text[start:].split("\n\n", 1)[0].split(":", 1)[1]
    return re.findall(r"`(\w+)`", paragraph)


def test_all_is_what_the_python_api_page_documents():
    assert sorted(documented_names()) == sorted(hermes_estop.__all__)


def test_every_public_name_exists():
    missing = [name for name in hermes_estop.__all__ if not hasattr(hermes_estop, name)]
    assert not missing
