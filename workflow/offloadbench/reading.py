"""Files of a results folder read as untrusted input: a regular file only, opened without
following a link and without blocking (`O_NOFOLLOW|O_NONBLOCK`), checked with `fstat`, and
read up to its bound and no further.

A folder from elsewhere may hold a link to /dev/zero (endless, and `st_size` says 0), a
FIFO (blocks forever), or a file that grows while it is read; each is refused in one line.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import UserError, shown

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class UnreadableFile(UserError):
    """A file that is not read: a link, not a regular file, over its bound, or unreadable."""


def size_text(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"


def read_regular(path: str | os.PathLike, limit: int, what: str = "this file") -> bytes:
    """The bytes of `path`, at most `limit` of them; UnreadableFile names the file and why."""
    path = Path(path)
    try:
        fd = os.open(path, _FLAGS)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EMLINK):
            raise UnreadableFile(f"{shown(path)}: a symbolic link; only regular files are read") from None
        raise UnreadableFile(f"{shown(path)}: cannot be read ({error.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
            raise UnreadableFile(f"{shown(path)}: {kind}; only regular files are read")
        if info.st_size > limit:
            raise UnreadableFile(f"{shown(path)}: {size_text(info.st_size)}, over the {size_text(limit)} {what} may hold")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise UnreadableFile(f"{shown(path)}: grew past the {size_text(limit)} {what} may hold while it was read")
        return b"".join(chunks)
    except OSError as error:
        raise UnreadableFile(f"{shown(path)}: cannot be read ({error.strerror})") from None
    finally:
        os.close(fd)
