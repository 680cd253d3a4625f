"""Every design citation in the code resolves: a "DESIGN N" (the old form) or a
"docs/design.md §N" (the new form) found in src/, tests/ or bench/ names an existing
"## N." heading of docs/design.md, so a newcomer can follow every reference (issue 14 item 1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN_DOC = ROOT / "docs" / "design.md"
SCANNED = ("src", "tests", "bench")

# "DESIGN 3", "DESIGN 2, 4", "DESIGN §5", "docs/design.md §6", "design.md §2, §4", "§2 and 4"
_NUMBERS = r"§?\s*\d+(?:\s*(?:,|and|&|/)\s*§?\s*\d+)*"
CITATION = re.compile(rf"(?:\bDESIGN\b|design\.md)\s*(?:section\s*)?({_NUMBERS})")
HEADING = re.compile(r"^## (\d+)\. \S", re.MULTILINE)


def citations_in(text: str) -> list[int]:
    """The section numbers cited in `text`, in order."""
    return [int(n) for match in CITATION.finditer(text) for n in re.findall(r"\d+", match.group(1))]


def sections_of(markdown: str) -> set[int]:
    return {int(n) for n in HEADING.findall(markdown)}


def unresolved(files: list[Path], sections: set[int], root: Path = ROOT) -> list[str]:
    """One line per citation of a section that `sections` does not have."""
    return [
        f"{path.relative_to(root)}:{line_no}: cites §{number}"
        for path in files
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for number in citations_in(line)
        if number not in sections
    ]


def scanned_files() -> list[Path]:
    me = Path(__file__).resolve()
    return sorted(
        p
        for d in SCANNED
        for p in (ROOT / d).rglob("*")
        if p.suffix in {".py", ".md", ".toml"} and p.is_file() and p.resolve() != me
    )


def test_design_doc_has_sections_one_to_nine_in_order() -> None:
    numbers = [int(n) for n in HEADING.findall(DESIGN_DOC.read_text(encoding="utf-8"))]
    assert numbers == list(range(1, 10))


def test_every_design_citation_in_the_code_resolves_to_a_section() -> None:
    files = scanned_files()
    assert any(citations_in(p.read_text(encoding="utf-8")) for p in files), "no citations found"
    assert unresolved(files, sections_of(DESIGN_DOC.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Reading (DESIGN 3) takes no lock", [3]),
        ("gated on EVERY location (DESIGN 2, 4; issue 9 item 6)", [2, 4]),
        ("so DESIGN 3's read rules apply", [3]),
        ("see docs/design.md §5 for the fence", [5]),
        ("(docs/design.md §2, §4)", [2, 4]),
        ("docs/design.md §6 and §7", [6, 7]),
        ("The straightforward design: read and parse", []),
        ("issue 9 item 6", []),
    ],
)
def test_citations_are_found_in_both_forms(text: str, numbers: list[int]) -> None:
    assert citations_in(text) == numbers


def test_a_citation_of_a_missing_section_is_reported(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('"""See DESIGN 3,\nand docs/design.md §12."""\n', encoding="utf-8")
    sections = sections_of(DESIGN_DOC.read_text(encoding="utf-8"))
    assert unresolved([module], sections, root=tmp_path) == ["module.py:2: cites §12"]


def test_a_section_removed_from_the_doc_breaks_the_citations_of_it() -> None:
    sections = sections_of(DESIGN_DOC.read_text(encoding="utf-8")) - {3}
    assert any(": cites §3" in line for line in unresolved(scanned_files(), sections))
