"""The report as a page people navigate: ids on the headings, a table of contents, figures
with captions, detail sections folded, and a style sheet for the screen and for print.

`structure` rearranges the element tree Python-Markdown builds from a report (escape.safe_html
runs it before the converter serialises the page), so report.md stays plain Markdown and the
HTML gains its navigation. Anchors follow GitHub's rule (`anchor`), so a link written in
report.md as `#heat_step` lands on the same heading on GitHub and in report.html.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4}
# Decides which sections are folded: (level, heading text, the h2 it lies under) -> fold?
Folding = Callable[[int, str, str], bool]


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(headings: Iterable[str]) -> list[str]:
    """The anchor of each heading in document order; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = []
    for base in map(slug, headings):
        out.append(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return out


def unescaped(text: str) -> str:
    """Markdown text as it reads: backslash escapes and code ticks removed."""
    return re.sub(r"\\(.)", r"\1", text).replace("`", "")


def markdown_headings(markdown_text: str) -> list[str]:
    """The text of every ATX heading of a Markdown text, as it reads, in order."""
    return [unescaped(match.group(2)) for line in markdown_text.splitlines()
            if (match := re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line))]


def _text(element: ET.Element) -> str:
    return "".join(element.itertext()).strip()


def _level(element: ET.Element) -> int:
    return HEADINGS.get(element.tag, 0)


def structure(root: ET.Element, folded: Folding, table_classes: dict[str, str] | None = None) -> None:
    """Rearrange a converted report in place: heading ids, the table of contents after the
    title, figures with captions, classes on the first table under named headings, and the
    sections `folded` selects inside <details> whose summary is their heading."""
    children = list(root)
    headings = [el for el in children if _level(el)]
    for element, anchor in zip(headings, anchors(_text(h) for h in headings), strict=True):
        element.set("id", anchor)
    _classify_tables(children, table_classes or {})
    root[:] = _figures(children)
    _fold(root, 3, folded)
    _fold(root, 2, folded)
    toc = _contents(headings)
    if toc is not None:
        first = next((i for i, el in enumerate(root) if el.tag == "h1"), -1)
        root.insert(first + 1, toc)


def _classify_tables(children: list[ET.Element], classes: dict[str, str]) -> None:
    wanted = None
    for element in children:
        if _level(element):
            wanted = classes.get(_text(element))
        elif element.tag == "table" and wanted:
            element.set("class", wanted)
            wanted = None


def _figures(children: list[ET.Element]) -> list[ET.Element]:
    """An image alone in its paragraph, followed by its caption's paragraph, becomes one
    <figure> with a <figcaption>."""
    out: list[ET.Element] = []
    for element in children:
        last = out[-1] if out else None
        image = last.find("img") if last is not None and last.tag == "p" and len(last) == 1 else None
        if image is None or (last.text or "").strip() or (image.tail or "").strip() or element.tag != "p":
            out.append(element)
            continue
        figure = ET.Element("figure")
        _print_size(image)
        figure.append(image)
        image.tail = None
        figcaption = ET.SubElement(figure, "figcaption")
        figcaption.text = element.text
        figcaption.extend(list(element))
        out[-1] = figure  # the image's paragraph, with this one as its caption
    return out


FIGURE_DPI = 300  # the PNGs' resolution (report/figures/style.py)
SCREEN_SCALE = 1.5  # figures on screen at 1.5× their print size: 7 pt text reads as about 14 px


def _print_size(image: ET.Element) -> None:
    """Give an embedded PNG a CSS width in proportion to its print size (96 CSS px per inch,
    times SCREEN_SCALE), so every figure keeps the text size it was drawn with, rather than
    one blown up to the column and the next one shrunk."""
    src = image.get("src", "")
    prefix = "data:image/png;base64,"
    if not src.startswith(prefix):
        return
    header = base64.b64decode(src[len(prefix): len(prefix) + 32] + "==")
    if header[:8] == b"\x89PNG\r\n\x1a\n" and len(header) >= 24:
        pixels = int.from_bytes(header[16:20], "big")
        image.set("width", str(max(1, round(pixels * 96 * SCREEN_SCALE / FIGURE_DPI))))


def _fold(root: ET.Element, level: int, folded: Folding) -> None:
    """Each heading of `level` that `folded` selects, with what follows it up to the next
    heading of its level or above, goes into <details><summary>heading</summary>…</details>."""
    out: list[ET.Element] = []
    section, details = "", None
    for element in list(root):
        if _level(element) == 2:
            section = _text(element)
        if details is not None and not 0 < _level(element) <= level:
            details.append(element)  # the open section goes on up to a heading of its level or above
            continue
        details = None
        if _level(element) == level and folded(level, _text(element), section):
            details = ET.Element("details")
            ET.SubElement(details, "summary").append(element)
            element = details
        out.append(element)
    root[:] = out


def _contents(headings: list[ET.Element]) -> ET.Element | None:
    """A <nav> of links to every second-level heading."""
    sections = [h for h in headings if _level(h) == 2]
    if not sections:
        return None
    nav = ET.Element("nav", {"class": "toc", "aria-label": "Contents"})
    ET.SubElement(nav, "strong").text = "Contents"
    items = ET.SubElement(nav, "ul")
    for heading in sections:
        link = ET.SubElement(ET.SubElement(items, "li"), "a", {"href": f"#{heading.get('id')}"})
        link.text = _text(heading)
    return nav


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.5;color:#222}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left}
th{background:#f3f3f3}img{max-width:100%}blockquote{border-left:4px solid #ccc;margin:0;padding:0 1em;color:#555}
code{background:#f5f5f5;padding:0 .2em}
nav.toc{font-size:.9em;border-bottom:1px solid #ddd;padding-bottom:.4em}nav.toc ul{display:inline;padding:0;margin:0 0 0 .5em}
nav.toc li{display:inline;margin-right:1em}
table.decisions{font-size:.9em}table.decisions td{white-space:nowrap}table.decisions td:nth-child(4){font-weight:600}
figure{margin:1.5em 0}figcaption{font-size:.9em;color:#444}
details{margin:.5em 0}summary{cursor:pointer}summary>h2,summary>h3{display:inline}
@media print{
body{max-width:none;margin:0;font-size:10pt}nav.toc{display:none}a{color:inherit;text-decoration:none}
details::details-content{content-visibility:visible;display:block}summary{list-style:none}
figure,table,tr{break-inside:avoid}h2,h3{break-after:avoid}img{max-height:9in;zoom:.6667}
}
"""
