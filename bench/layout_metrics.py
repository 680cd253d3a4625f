"""The layout and complexity figures of issue 34 for one tree, so that before/after columns are reproducible.

Usage: `python bench/layout_metrics.py [TREE]` (TREE is a checkout; default: this one). Needs `radon`
(`pip install radon`) for the grades; `duplicates` is run when it is on PATH.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

NOQA = re.compile(r"#\s*noqa:\s*([A-Z0-9, ]+)")
TYPE_CHECKING_FALSE = re.compile(r"^TYPE_CHECKING\s*=\s*False", re.MULTILINE)
ANY_ANNOTATION = re.compile(r":\s*Any\b")


def function_lengths(tree: ast.AST) -> list[int]:
    return [
        (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def imports_in_functions(tree: ast.AST) -> int:
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            count += sum(
                1 for inner in ast.walk(node) if isinstance(inner, ast.Import | ast.ImportFrom)
            )
    return count


def enabled_rules(root: Path) -> list[str]:
    config = tomllib.loads((root / "pyproject.toml").read_text())
    lint = config.get("tool", {}).get("ruff", {}).get("lint", {})
    return list(lint.get("select", [])) + list(lint.get("extend-select", []))


def unenabled_noqa(paths: list[Path], enabled: list[str]) -> Counter[str]:
    cited: Counter[str] = Counter()
    for path in paths:
        for match in NOQA.finditer(path.read_text()):
            for code in match.group(1).replace(",", " ").split():
                if not any(code.startswith(prefix) for prefix in enabled):
                    cited[re.sub(r"\d+$", "", code)] += 1
    return cited


def duplicates_line(package: Path) -> str:
    if shutil.which("duplicates") is None:
        return "(duplicates not installed)"
    out = subprocess.run(
        ["duplicates", "--repo", str(package.parent), "--most", "200"], capture_output=True, text=True, check=False
    ).stdout
    return out.splitlines()[0] if out else ""


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    package = root / "src" / "hermes_estop"
    modules = sorted(package.rglob("*.py"))
    per_folder = Counter(str(path.parent.relative_to(package)) for path in modules)
    grades: Counter[str] = Counter()
    worst: list[tuple[int, str]] = []
    lengths: list[int] = []
    long_functions: list[tuple[int, str]] = []
    inner_imports = 0
    inner_import_modules = 0
    type_checking_false = 0
    any_count = 0
    for path in modules:
        source = path.read_text()
        tree = ast.parse(source)
        for block in cc_visit(source):
            rank = cc_rank(block.complexity)
            grades[rank] += 1
            if rank in "DEF":
                worst.append((block.complexity, f"{rank} {block.complexity} {path.relative_to(package)}:{block.fullname}"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                lengths.append(length)
                if length > 50:
                    long_functions.append((length, f"{length} {path.relative_to(package)}:{node.name}"))
        found = imports_in_functions(tree)
        inner_imports += found
        inner_import_modules += found > 0
        type_checking_false += bool(TYPE_CHECKING_FALSE.search(source))
        any_count += len(ANY_ANNOTATION.findall(source))
    cited = unenabled_noqa([*modules, *sorted((root / "tests").rglob("*.py")), *sorted((root / "bench").glob("*.py"))], enabled_rules(root))
    print(f"modules: {len(modules)}, at the package root: {per_folder['.']}")
    print("modules per folder: " + ", ".join(f"{folder}={n}" for folder, n in sorted(per_folder.items())))
    print(f"lines: {sum(len(p.read_text().splitlines()) for p in modules)}; modules over 380 lines: "
          f"{sum(len(p.read_text().splitlines()) > 380 for p in modules)}")
    print("radon cc blocks per grade: " + ", ".join(f"{g}={grades[g]}" for g in "ABCDEF")
          + f"; C or worse: {sum(grades[g] for g in 'CDEF')}")
    for _, line in sorted(worst, reverse=True):
        print(f"  {line}")
    print(f"functions: {len(lengths)}; over 50 lines: {sum(n > 50 for n in lengths)}; over 60 lines: {sum(n > 60 for n in lengths)}")
    for _, line in sorted(long_functions, reverse=True):
        print(f"  {line}")
    print(f"imports inside functions: {inner_imports} in {inner_import_modules} modules")
    print(f"modules with TYPE_CHECKING = False: {type_checking_false}")
    print(f"': Any' annotations: {any_count}")
    print(f"noqa citing rules not enabled: {sum(cited.values())} ({', '.join(f'{k}={v}' for k, v in cited.most_common())})")
    print(f"duplicates: {duplicates_line(package)}")


if __name__ == "__main__":
    main()
