"""Files opened without ever blocking: a FIFO, a device, a directory or a socket given
where a file to read is expected (a C header, an ELF object, a copybook, a stream
description) is refused from its ``stat`` before any ``open`` (opening a FIFO for reading
waits for a writer; ``/dev/zero`` never ends); the open itself is non-blocking and the
opened file is checked again, in case the path was replaced in between.
"""

import os
import stat

from ._errors import LayoutError

__all__ = ["kind_of", "open_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(mode):
    """What a file of this ``st_mode`` is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "a special file")


def open_regular(path, fix):
    """A binary file object of the regular file at ``path``.

    Anything else is a :class:`LayoutError` saying what it is, followed by ``fix``.
    OSError (no such file, no permission) is left to the caller, whose message knows what
    the file was for.
    """
    shown = os.fspath(path)
    kind = kind_of(os.stat(path).st_mode)
    if kind is None:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
        )
        try:
            kind = kind_of(os.fstat(fd).st_mode)  # the path was replaced since the stat
            if kind is None:
                return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise LayoutError(f"{shown!r} is {kind}, not a regular file; {fix}")
