"""Errors a user can fix: reported as one line naming the key, cell or file, no traceback."""


class UserError(ValueError):
    """Base of every error whose message alone tells the user what to change."""
