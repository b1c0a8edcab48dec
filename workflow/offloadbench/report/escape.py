"""Text that came from data, made inert before it reaches Markdown, HTML or a figure.

Results from other machines are untrusted: a CPU model, a reason, a flag or a GPU name can
hold anything. Three layers, each where its format needs it:
- `md_text`/`md_data`/`md_frame`: Markdown specials and HTML characters in data become
  literal text, so report.md reads the same and no link, image or tag comes from data;
- `safe_html`: Markdown to HTML with raw HTML off, and only the figures that the run itself
  wrote embedded (looked up by name under its output folder, never by a path from text);
- `literal`/`literal_frame`: `$` escaped, so matplotlib's mathtext never parses data.
LaTeX has its own escaping (latex.tex_escape).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

_MD_SPECIAL = re.compile(r"([\\`*\[\]!|{}])")
_LOOSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # emphasis; OPENBLAS_CORETYPE is not
_HTML_CHARS = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md_text(value) -> str:
    """`value` as Markdown that renders as exactly its text, on one line."""
    text = re.sub(r"[\r\n\t\v\f]+", " ", str(value))
    text = "".join(_HTML_CHARS.get(ch, ch) for ch in text)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _LOOSE_UNDERSCORE.sub(r"\\_", text)


def md_data(value):
    """Every string in a JSON-like value (environment.json, a round record) through md_text."""
    if isinstance(value, str):
        return md_text(value)
    if isinstance(value, dict):
        return {key: md_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [md_data(item) for item in value]
    return value


def _map_text(frame: pd.DataFrame, change) -> pd.DataFrame:
    """A copy of `frame` with `change` applied to every text cell (numbers and missing values unchanged)."""
    if frame is None or frame.empty:
        return frame
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(lambda v: change(v) if isinstance(v, str) else v)
    return out


def md_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table with every text cell through md_text."""
    return _map_text(frame, md_text)


def literal(text) -> str:
    """Text drawn as it is: matplotlib parses `$...$` as mathtext unless the `$` is escaped."""
    return str(text).replace("$", r"\$")


def literal_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table whose text cells are drawn literally (see `literal`)."""
    return _map_text(frame, literal)


_SAFE_LINK = re.compile(r"^(https?://|#)", re.IGNORECASE)


def safe_html(markdown_text: str, figures: dict[str, Path], title: str) -> str:
    """One self-contained page: raw HTML in the Markdown is shown as text, a link keeps its
    target only when it is http(s) or an anchor, and an image is embedded only when its
    source is one of `figures` (source as written in the Markdown → the PNG this run wrote);
    any other image becomes its alt text."""
    import markdown
    from markdown.treeprocessors import Treeprocessor

    class Inert(Treeprocessor):
        def run(self, root):
            for element in root.iter():
                if element.tag == "img":
                    path = figures.get(element.get("src", ""))
                    if path is not None and path.is_file():
                        data = base64.b64encode(path.read_bytes()).decode("ascii")
                        element.set("src", f"data:image/png;base64,{data}")
                    else:
                        alt = element.get("alt", "")
                        element.tag, element.text = "span", f"[figure {alt} not embedded]"
                        element.attrib.clear()
                elif element.tag == "a" and not _SAFE_LINK.match(element.get("href", "")):
                    element.tag = "span"
                    element.attrib.clear()

    converter = markdown.Markdown(extensions=["tables", "sane_lists"])
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    converter.treeprocessors.register(Inert(converter), "inert", 0)
    body = converter.convert(markdown_text)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{HTML_STYLE}</style></head><body>\n{body}\n</body></html>\n")


HTML_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.5;color:#222}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left}
th{background:#f3f3f3}img{max-width:100%}blockquote{border-left:4px solid #ccc;margin:0;padding:0 1em;color:#555}
code{background:#f5f5f5;padding:0 .2em}
"""
