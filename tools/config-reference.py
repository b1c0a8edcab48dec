"""The key tables of config/README.md, generated from the config schema: each key with its
default (and config.yaml's value where that differs) and the first sentence of its
description. The schema is the one home of what a key means; this writes its summary
between the README's `<!-- keys: <section> -->` and `<!-- end keys -->` markers.

    python tools/config-reference.py          # rewrite config/README.md's tables
    python tools/config-reference.py --check  # exit 1 when they are not current (a test runs this)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
CONFIG = ROOT / "config" / "config.yaml"
README = ROOT / "config" / "README.md"
TOP = "top"  # the keys outside the sections
BLOCK = re.compile(r"(<!-- keys: (?P<section>[a-z_]+) -->\n).*?(<!-- end keys -->)", re.DOTALL)
def first_sentence(text: str) -> str:
    """The description's first sentence, up to its first ";" where that says enough: both
    looked for outside parentheses (a full stop ends a sentence, but not in "e.g.")."""
    text, depth = " ".join(text.split()), 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth:
            continue
        ends_sentence = char == "." and text[at + 1:at + 2] in (" ", "") and not text[:at + 1].endswith(("e.g.", "i.e."))
        ends_clause = char == ";" and len(text[:at].split()) >= MIN_WORDS
        if ends_sentence or ends_clause:
            return text[:at] + "."
    return text.rstrip(".") + "."


MIN_WORDS = 4  # a clause shorter than this says too little on its own


def shown(value) -> str:
    if value is None:
        return "none"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return f"`{text.removesuffix('...').strip()}`"


def rows(schema: dict, config: dict) -> dict[str, list[tuple[str, str, str]]]:
    """(key, default, summary) by section; a section's own keys and, for `cluster`, a node type's."""
    tables: dict[str, list[tuple[str, str, str]]] = {TOP: []}
    for name, node in schema["properties"].items():
        children = node.get("properties")
        if name == "cluster":
            entry = node["additionalProperties"]["properties"]
            tables[TOP].append((name, shown(node.get("default")), first_sentence(node.get("description", ""))))
            tables["cluster"] = [(f"cluster.<label>.{key}", shown(child.get("default")),
                                  first_sentence(child.get("description", ""))) for key, child in entry.items()]
        elif children and name != "bundle_limits":
            tables[name] = [row(f"{name}.{key}", child, (config.get(name) or {}).get(key, child.get("default")))
                            for key, child in children.items()]
        elif children:
            tables[TOP] += [row(f"{name}.{key}", child, child.get("default")) for key, child in children.items()]
        else:
            tables[TOP].append(row(name, node, config.get(name, node.get("default"))))
    return tables


def choices(node: dict) -> str:
    """" One of: `a`, `b`." where the schema lists the values a key (or each item of its list) takes."""
    values = node.get("enum") or (node.get("items") or {}).get("enum")
    return f" One of: {', '.join(shown(v) for v in values)}." if values else ""


def row(key: str, node: dict, configured) -> tuple[str, str, str]:
    default = shown(node.get("default"))
    if configured != node.get("default"):
        default += f" ({shown(configured)} in config.yaml)"
    return key, default, first_sentence(node.get("description", "")) + choices(node)


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(entries: list[tuple[str, str, str]]) -> str:
    lines = ["| key | default | meaning |", "|---|---|---|"]
    lines += [f"| `{key}` | {default} | {cell(summary)} |" for key, default, summary in entries]
    return "\n".join(lines) + "\n"


def rendered(readme: str, tables: dict[str, list]) -> str:
    def fill(match: re.Match) -> str:
        section = match["section"]
        if section not in tables:
            sys.exit(f"error: config/README.md names a section the schema lacks: {section}")
        return f"{match.group(1)}{table(tables[section])}{match.group(3)}"

    return BLOCK.sub(fill, readme)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when config/README.md is not current")
    args = parser.parse_args(argv)
    tables = rows(yaml.safe_load(SCHEMA.read_text()), yaml.safe_load(CONFIG.read_text()) or {})
    readme = README.read_text()
    missing = sorted(set(tables) - set(sections_in(readme)))
    if missing:
        print(f"error: config/README.md has no table for: {', '.join(missing)}", file=sys.stderr)
        return 1
    current = rendered(readme, tables)
    if args.check:
        if current != readme:
            print("error: config/README.md's key tables are not the schema's: run python tools/config-reference.py",
                  file=sys.stderr)
            return 1
        return 0
    README.write_text(current)
    return 0


def sections_in(readme: str) -> list[str]:
    return [match["section"] for match in BLOCK.finditer(readme)]


if __name__ == "__main__":
    sys.exit(main())
