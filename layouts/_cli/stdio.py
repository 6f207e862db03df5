"""The standard streams: closed ones held on /dev/null as the command starts, and standard
input read through a buffer that gives its first bytes back (its format is told from them)."""

import io
import os
import sys

from .errors import CommandError

CLOSED: "set[str]" = set()  # standard streams closed when the command started (see standard_streams)


def standard_streams():
    """Standard input, output or error closed as the command starts (``<&-``, ``>&-``,
    ``2>&-``), where Python sets ``sys.stdin``/``stdout``/``stderr`` to None. Each closed
    descriptor is opened on /dev/null, so that no file the command opens takes its
    number (what a library then writes to descriptor 1 or 2 would land in that file),
    and the Python stream is made over it: text for a closed stream goes nowhere, never
    to another stream or a file. Returns the names of the streams that were closed."""
    closed = set()
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        closed.add(name)
        try:
            os.fstat(fd)
        except OSError:  # the descriptor is closed: hold its number with /dev/null
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))
    return closed


def check_open(args):
    """``-`` for a standard stream that was closed as the command started: an error that says so."""
    if args.dst == "-" and "stdout" in CLOSED:
        raise CommandError(
            "--to -: standard output is closed (>&-), so the data has nowhere to go; redirect it to a "
            "file or a pipe, or give --to FILE"
        )
    if args.src == "-" and "stdin" in CLOSED:
        raise CommandError(
            "SRC -: standard input is closed (<&-), so there is nothing to read; pipe the input in "
            "(... | layouts convert - ...) or give its path"
        )


class _Stdin(io.RawIOBase):
    """Standard input with its first bytes read ahead (to tell its format) and then
    given back first."""

    def __init__(self, raw):
        super().__init__()
        self.raw, self.name = raw, "standard input"
        try:  # what standard input is (a file given with < FILE is never written into: _files)
            self.source_stat = os.fstat(raw.fileno())
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            self.source_stat = None
        head = b""
        while len(head) < 8:
            more = raw.read(8 - len(head))
            if not more:
                break
            head += more
        self.head, self.ahead = head, head

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.ahead:
            n = min(len(buffer), len(self.ahead))
            buffer[:n], self.ahead = self.ahead[:n], self.ahead[n:]
            return n
        return self.raw.readinto(buffer)


def open_stdin():
    """Standard input, buffered, its first bytes read ahead (``.raw.head``)."""
    return io.BufferedReader(_Stdin(sys.stdin.buffer), buffer_size=1 << 20)
