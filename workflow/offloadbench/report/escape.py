"""Text that came from data, made inert before it reaches Markdown, HTML or a figure.

Results from other machines are untrusted: a CPU model, a reason, a flag or a GPU name can
hold anything. Three layers, each where its format needs it:
- `md_text`/`md_data`/`md_frame`: Markdown specials and HTML characters in data (keys
  included) become literal text, and bare URLs and e-mail addresses are broken up for
  GitHub's autolinks, so report.md reads the same and no link, image or tag comes from data;
- `safe_html`: Markdown to HTML with raw HTML off, and only the figures that the run itself
  wrote embedded (looked up by name under its output folder, never by a path from text);
- `literal`/`literal_frame`: `$` escaped and control characters left out, so matplotlib's
  mathtext never parses data.
The other outputs have one rule each, beside the code that writes them: LaTeX
(text/latex.tex_escape), CSV (offloadbench.csvsafe, for every table the pipeline writes)
and the terminal (offloadbench.errors.printable and shown, for every message).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from ..errors import one_line
from ..textcells import map_text
from .page import STYLE, Folding, structure

_MD_SPECIAL = re.compile(r"([\\`*\[\]!|{}])")
_LOOSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # emphasis; OPENBLAS_CORETYPE is not
_BLANKS = re.compile(r"[\t\n\v\f\r]")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")  # ESC, NUL, DEL, ...: no engine takes them as text


def _plain(text) -> str:
    """Text with line breaks and tabs as spaces and every other ASCII control character left out."""
    return _CONTROLS.sub("", _BLANKS.sub(" ", str(text)))


# What GitHub's Markdown (cmark-gfm) turns into a link without brackets: a scheme's "://",
# "www." and an e-mail's "@". `&#47;` and `\.` read as the same characters but are no longer
# the literal text the autolinker looks for; an e-mail is only broken by a character that is
# not part of a domain, so "@" is followed by a word joiner (invisible, U+2060).
_AUTOLINK = ((re.compile(r"://"), ":&#47;/"), (re.compile(r"(?i)(?<![A-Za-z0-9])(www)\."), r"\1\\."),
             (re.compile(r"@"), "@&#8288;"))


def md_text(value) -> str:
    """`value` as Markdown that renders as exactly its text, on one line, linking nowhere
    (not even as a bare URL or e-mail address under GitHub's autolinks)."""
    text = _CONTROLS.sub("", re.sub(r"[\r\n\t\v\f]+", " ", str(value)))  # control characters carry no text
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = _LOOSE_UNDERSCORE.sub(r"\\_", text)
    for pattern, replacement in _AUTOLINK:
        text = pattern.sub(replacement, text)
    return text


def md_data(value):
    """Every string in a record (environment.json, a round's record, as typed objects or
    plain values) through md_text, keys included: a report may list a map's keys (the
    BLAS variables set, say)."""
    if isinstance(value, str):
        return md_text(value)
    if isinstance(value, Mapping):
        return MappingProxyType({md_text(key): md_data(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return type(value)(md_data(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: md_data(getattr(value, f.name)) for f in dataclasses.fields(value)
                                             if f.init})
    return value


def md_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table with every text cell through md_text."""
    return map_text(frame, md_text)


def terminal_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table whose text cells are safe to print: one line each, every control character
    escaped as `repr` writes it, long values cut (errors.one_line, the terminal's rule)."""
    return map_text(frame, one_line)


def literal(text) -> str:
    """Text drawn as it is: matplotlib parses `$...$` as mathtext unless the `$` is escaped,
    and a control character has no glyph (a tab or line break becomes a space)."""
    return _plain(text).replace("$", r"\$")


def literal_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table whose text cells are drawn literally (see `literal`)."""
    return map_text(frame, literal)


_SAFE_LINK = re.compile(r"^(https?://|#)", re.IGNORECASE)


def safe_html(markdown_text: str, figures: dict[str, Path], title: str, folded: Folding | None = None,
              table_classes: dict[str, str] | None = None) -> str:
    """One self-contained page: raw HTML in the Markdown is shown as text, a link keeps its
    target only when it is http(s) or an anchor, and an image is embedded only when its
    source is one of `figures` (source as written in the Markdown → the PNG this run wrote);
    any other image becomes its alt text. The page's navigation (page.structure: heading
    ids, contents, figures with captions, the sections `folded` selects in <details>) is
    built on the tree after that, so it adds no element from data."""
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
            structure(root, folded or (lambda *_: False), table_classes)

    converter = markdown.Markdown(extensions=["tables", "sane_lists"])
    converter.preprocessors.deregister("html_block")
    converter.inlinePatterns.deregister("html")
    converter.treeprocessors.register(Inert(converter), "inert", 0)
    body = converter.convert(markdown_text)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


# --- LaTeX: every text cell, header, caption, comment and macro body -------------------------

# ASCII-only output: these are the characters pdflatex cannot take as they are.
_TEX_SPECIAL = {
    **{ch: "\\" + ch for ch in "&%$#_{}"},  # a backslash makes these literal
    **{ch: rf"\text{name}{{}}" for ch, name in  # text-mode symbols: \textless{}
       (("\\", "backslash"), ("~", "asciitilde"), ("^", "asciicircum"), ("<", "less"), (">", "greater"),
        ("|", "bar"), ("µ", "mu"), ("μ", "mu"), ("†", "dagger"))},
    **{ch: rf"\ensuremath{{\{name}}}" for ch, name in  # maths symbols: \ensuremath{\times}
       (("×", "times"), ("±", "pm"), ("≈", "approx"), ("≤", "leq"), ("≥", "geq"), ("→", "rightarrow"), ("÷", "div"),
        ("δ", "delta"), ("σ", "sigma"), ("·", "cdot"), ("↔", "leftrightarrow"))},
    **{ch: rf"\textsuperscript{{{digit}}}" for ch, digit in (("²", 2), ("³", 3), ("⁴", 4))},
    "−": r"\ensuremath{-}",
    "…": r"\dots{}",
    "–": "--",
    "—": "---",
    "’": "'",
    "‘": "`",
    "“": "``",
    "”": "''",
    "\u00a0": "~",
}


def tex_escape(text) -> str:
    """Text as LaTeX source that prints it; control characters are left out and other
    non-ASCII characters become `?` (never a crash)."""
    return "".join(_TEX_SPECIAL.get(ch, ch if ch.isascii() else "?") for ch in _plain(text))


_PLAIN = {"–": "-", "—": "-", "×": "x", "±": "+-", "µ": "u", "μ": "u", "≈": "~", "≤": "<=", "≥": ">=",
          "→": "->", "÷": "/", "δ": "delta", "σ": "sigma", "−": "-", "·": "*", "…": "...", "↔": "<->",
          "²": "^2", "³": "^3", "⁴": "^4", "†": "+", "‘": "'", "’": "'", "“": '"', "”": '"'}


def tex_comment(text: str) -> str:
    """Text for a `%` comment: one line, ASCII like the rest of the file."""
    text = " ".join(_plain(text).split())
    return "".join(ch if ch.isascii() else _PLAIN.get(ch, "?") for ch in text)
