"""Errors a user can fix: reported as one line naming the key, cell or file, no traceback."""


class UserError(ValueError):
    """Base of every error whose message alone tells the user what to change."""


def one_line(text: str, limit: int = 300) -> str:
    """Text from data as part of a one-line message: whitespace runs become one space, and
    a long value is cut (a schema error quotes the value, which may be huge)."""
    import re

    flat = re.sub(r"\s+", " ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
