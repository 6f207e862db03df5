"""Legacy record files: memory-mapped, checked against the record size. Output files:
disk blocks reserved just ahead of the writes."""

import ctypes
import io
import mmap
import os
import stat
import sys
import warnings

import numpy as np

from ._aos import AoS, as_layout
from ._errors import LayoutError

__all__ = ["read_records"]

_TRAILING = ("error", "ignore")


def read_records(source, layout, offset=0, count=None, *, trailing="error"):
    """The records of a binary file as an :class:`AoS`, memory-mapped (nothing is read).

    Parameters
    ----------
    source : str, os.PathLike or file object
        A file path, or an open binary file: a real file is mapped, any other file
        object (``io.BytesIO``, a pipe) is read.
    layout : Layout or numpy.dtype
        The record type, e.g. ``Layout.from_c(header, "struct tick")``.
    offset : int
        Bytes of file header before the first record.
    count : int, optional
        Records to take (default: all after ``offset``).
    trailing : {"error", "ignore"}
        What to do when the bytes after ``offset`` are not a whole number of records:
        a LayoutError stating the sizes (default), or a warning saying how many bytes
        at the end were skipped.
    """
    layout = as_layout(layout)
    check_trailing(trailing)
    if not isinstance(offset, int) or offset < 0:
        raise LayoutError(f"offset must be a non-negative number of bytes, got {offset!r}")
    if count is not None and (not isinstance(count, int) or count < 0):
        raise LayoutError(f"count must be a non-negative number of records, got {count!r}")
    name, size, mapped, data = _open(source)
    itemsize = layout.itemsize
    if count is None:
        whole = whole_records(name, size, offset, itemsize, trailing)
    else:
        whole = whole_records(name, size, offset, itemsize, "ignore", quiet=True)
        if count > whole:
            raise LayoutError(
                f"{name} holds {whole} whole records of {itemsize} bytes after offset {offset}; "
                f"count={count} asks for more"
            )
        whole = count
    nbytes = whole * itemsize
    if data is not None:  # a stream, already read
        return AoS(memoryview(data)[offset : offset + nbytes], layout)
    if nbytes == 0:
        return AoS(b"", layout)
    return AoS(np.memmap(mapped, dtype=layout.dtype, mode="r", offset=offset, shape=(whole,)), layout)


def check_trailing(trailing):
    if trailing not in _TRAILING:
        raise LayoutError(f"trailing must be one of {_TRAILING}, got {trailing!r}")


def whole_records(name, size, offset, itemsize, trailing, *, quiet=False, stacklevel=3):
    """Whole records in a file of ``size`` bytes after an ``offset``-byte header. A header
    longer than the file is an error; a partial record at the end follows ``trailing``
    (see :func:`partial_record`), or is passed over silently with ``quiet=True``."""
    if offset > size:
        raise LayoutError(f"{name} is {size} bytes, shorter than the {offset}-byte header offset")
    whole, left = divmod(size - offset, itemsize)
    if left and not quiet:
        partial_record(f"{name} is {size} bytes: after the {offset}-byte header that is {whole} records of "
                       f"{itemsize} bytes and {left} bytes left over", itemsize, left, trailing, stacklevel + 1)
    return whole


def partial_record(message, itemsize, left, trailing, stacklevel=3):
    """Bytes after the last whole record: a LayoutError (``trailing="error"``) or a warning
    that they were skipped (``"ignore"``). ``message`` states the sizes."""
    if trailing == "error":
        raise LayoutError(
            f"{message}; check the layout (record size {itemsize}) and the header offset, or pass "
            f"trailing='ignore' to skip the partial record"
        )
    warnings.warn(f"{message}; skipped those {left} bytes", stacklevel=stacklevel)


def _open(source):
    """``(name, size in bytes, path or file to map, bytes read from a stream)``; offsets
    count from the start of the file, or of the stream's remaining bytes."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            return path, os.path.getsize(path), path, None
        except OSError as err:
            raise LayoutError(f"cannot read records from {path!r}: {err.strerror}") from None
    if not hasattr(source, "read"):
        raise LayoutError(f"read_records takes a path or a binary file object, got {type(source).__name__}")
    name = str(getattr(source, "name", type(source).__name__))
    try:
        fd = source.fileno()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise io.UnsupportedOperation("not a regular file")  # a pipe or a terminal: read it
        size = st.st_size
        if size:
            mmap.mmap(fd, 0, access=mmap.ACCESS_READ).close()  # a regular file: it maps
        return name, size, source, None
    except (OSError, io.UnsupportedOperation, ValueError, AttributeError):
        data = source.read()
        if isinstance(data, str):
            raise LayoutError(f"{name} is open in text mode; open it with 'rb'") from None
        return name, len(data), None, data


# ----------------------------------------------------------------- output files


def _fallocate():
    """libc's ``fallocate`` on Linux, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    call.restype = ctypes.c_int
    return call


_FALLOCATE = _fallocate()
_KEEP_SIZE = 1  # FALLOC_FL_KEEP_SIZE: reserve blocks past the end without growing the file


class BlockReservation:
    """Reserves the disk blocks of a file being written just ahead of its end.

    Appending to a new file makes the filesystem find blocks for it page by page as
    writes come (ext4's delayed allocation); with the blocks reserved beforehand
    (``fallocate`` with ``FALLOC_FL_KEEP_SIZE``, which leaves the file's size as it
    is) writes only fill them (``python -m benchmarks.block_reservation`` measures
    it; README, "Files."). At most the next write's bytes are
    reserved past the end, and :meth:`close` gives back what was not written. Where
    the call is missing or refused (another system, a filesystem without it, a full
    disk), nothing is reserved and writes go on as before, so a full disk is still
    reported by the write itself.
    """

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY) if _FALLOCATE is not None else None

    def ahead(self, nbytes):
        """Reserve ``nbytes`` past the file's current end."""
        if self.fd is None or nbytes <= 0:
            return
        if _FALLOCATE(self.fd, _KEEP_SIZE, os.fstat(self.fd).st_size, nbytes) != 0:
            self.close()  # not supported here, or no room: write without reserving

    def close(self):
        """Give back the blocks reserved past the end (a truncate to the file's size)."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.ftruncate(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
