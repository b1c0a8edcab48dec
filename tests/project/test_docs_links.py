"""Every relative link and anchor in the project's Markdown resolves, as GitHub renders it:
the README, config/README.md, the pages under docs/ and results/README.md."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "config" / "README.md", ROOT / "results" / "README.md",
                *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation but - and _ dropped,
    spaces to hyphens."""
    text = re.sub(r"`|\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if not count else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans hold no links
    return [m.group(1) or m.group(2) for m in LINK.finditer(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto: — not ours to check offline
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## A `code` heading, with commas\n\n[ok](#a-code-heading-with-commas) [bad](#nope) "
                    "[gone](missing.md) ![fig](pic.png)\n\n```\n[not a link](nowhere.md)\n```\n")
    assert "a-code-heading-with-commas" in anchors(page)
    assert links(page) == ["#a-code-heading-with-commas", "#nope", "missing.md", "pic.png"]


def test_every_docs_page_is_linked_from_the_readme():
    readme = set(links(ROOT / "README.md"))
    unlinked = [p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")
                if p.relative_to(ROOT).as_posix() not in {t.partition("#")[0] for t in readme}]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
