"""Errors a user can fix: reported as one line naming the key, cell or file, no traceback.

The terminal's rule for text from data lives here too, since every such text reaches the
terminal inside one of these messages: `shown` quotes a name (a path, a tar member) that
holds anything unprintable, the way `repr` does, and every message is made printable as a
whole, so a terminal escape or a newline that would forge a second `error:` line is shown
as `\\x1b` or `\\n`, never sent.
"""

from __future__ import annotations

import re


def printable(text) -> str:
    """`text` with every unprintable character (controls, line breaks, bidi overrides)
    written as `repr` writes it: `\\x1b`, `\\n`, `\\u202e`."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def shown(name) -> str:
    """A name from data (a path, a member of a bundle) as a message quotes it: as it is
    when it is plain printable text, else repr-like, quoted and escaped."""
    text = str(name)
    return text if text and text.isprintable() and text.strip() == text else repr(text)


class UserError(ValueError):
    """Base of every error whose message alone tells the user what to change. Its text is
    always printable (see `printable`), whatever data went into it."""

    def __str__(self) -> str:
        return printable(super().__str__())


def key_path(parts) -> str:
    """Where a value sits in a document, as a message names it: "grid.sizes[2]"."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def one_line(text: str, limit: int = 300) -> str:
    """Text from data as part of a one-line message: whitespace runs become one space,
    other unprintable characters are escaped, and a long value is cut (a schema error
    quotes the value, which may be huge)."""
    flat = re.sub(r"\s+", " ", str(text)[: 4 * limit]).strip()
    flat = printable(flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
