"""Count the branches on an array library's name outside the library registry.

A new library must be a file in workflow/offloadbench/libraries/ and nothing more, so no
other code may ask which library it holds by name: no `library == "torch"`, no
`"numpy" in libraries`, no `lib.__name__ == "torch"`. This lists every comparison (==, !=,
in, not in, is) with a registered library's name as a string literal, in the Python files
and Snakemake rules under the given folders, skipping the registry itself, and exits 1
where there is any. Looking a library up by name (`libraries.get("torch")`) is no branch.

    python tools/library-branches.py                 # workflow/ and the Snakefile
    python tools/library-branches.py path/to/folder  # any folders or files
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "workflow" / "offloadbench" / "libraries"
sys.path.insert(0, str(ROOT / "workflow"))

from offloadbench import libraries

NAMES = frozenset({*libraries.NAMES, *(libraries.get(name).module_name for name in libraries.NAMES)})
_QUOTED = "|".join(re.escape(name) for name in sorted(NAMES))
# Snakemake rules are not plain Python: a comparison next to a quoted name, on one line
RULE_BRANCH = re.compile(rf"""(==|!=|\bin\b|\bis\b)\s*["']({_QUOTED})["']|["']({_QUOTED})["']\s*(==|!=|\bin\b|\bnot in\b)""")


def _names_in(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_in(item) for item in node.elts)
    return False


def python_branches(path: Path) -> list[int]:
    """The lines of `path` with a comparison against a library's name."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Compare) and any(_names_in(side) for side in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, ast.match_case) and _names_in(getattr(node.pattern, "value", None)):
            lines.append(node.pattern.lineno)
    return lines


def rule_branches(path: Path) -> list[int]:
    return [number for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if RULE_BRANCH.search(line.split("#", 1)[0])]


def files(roots: list[Path]) -> list[Path]:
    found = []
    for root in roots:
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        found += [p for p in candidates if p.is_file() and (p.suffix in (".py", ".smk") or p.name == "Snakefile")
                  and REGISTRY not in p.resolve().parents]
    return found


def branches(roots: list[Path]) -> list[str]:
    """'path:line' of every branch on a library's name under `roots`."""
    found = []
    for path in files(roots):
        lines = python_branches(path) if path.suffix == ".py" else rule_branches(path)
        shown = path.relative_to(ROOT) if ROOT in path.resolve().parents else path
        found += [f"{shown}:{line}" for line in lines]
    return found


def main(argv: list[str]) -> int:
    roots = [Path(a).resolve() for a in argv] or [ROOT / "workflow", ROOT / "Snakefile"]
    found = branches(roots)
    for where in found:
        print(where)
    print(f"{len(found)} branches on a library's name outside {REGISTRY.relative_to(ROOT)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
