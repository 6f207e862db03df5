"""Legacy record files: memory-mapped, checked against the record size; FIFOs and
devices read as streams, Parquet/Arrow files refused as records. Outputs: written whole
or not at all (unnamed files linked in, or temporary files renamed), streamed into pipes
and devices, with disk blocks reserved just ahead of the writes."""

import ctypes
import errno
import io
import mmap
import numbers
import os
import secrets
import stat
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from ._aos import AoS, as_layout
from ._errors import ConversionError, LayoutError

# Ctrl-C held: the one place layouts holds SIGINT (InterruptHold is imported from here by _stream and _convert)
from .kernels.threads import InterruptHold, deferred_interrupts  # noqa: F401

if TYPE_CHECKING:
    from ._layout import Layout

__all__ = ["read_records"]

_TRAILING = ("error", "ignore")


def read_records(
    source: "str | os.PathLike[str] | BinaryIO",
    layout: "Layout | np.typing.DTypeLike",
    offset: int = 0,
    count: "int | None" = None,
    *,
    trailing: str = "error",
) -> AoS:
    """The records of a binary file as an :class:`AoS`, memory-mapped (nothing is read).

    Parameters
    ----------
    source : str, os.PathLike or file object
        A file path, or an open binary file: a regular file (or a block device) is
        mapped; a FIFO, a character device or any other file object (``io.BytesIO``,
        a pipe) is read. A character device (``/dev/zero``, a terminal) may never end,
        so it needs ``count``. A Parquet or Arrow IPC file is refused with an error
        that says so (it begins and ends with their magic bytes). A file object is read
        from its current position (after a header the caller read from it), and is
        left just after the records taken.
    layout : Layout or numpy.dtype
        The record type, e.g. ``Layout.from_c(header, "struct tick")``.
    offset : int
        Bytes of header before the first record, counted from where the input starts
        (a file object's current position).
    count : int, optional
        Records to take (default: all after ``offset``); bytes after them are not
        records (a trailer, extended headers, another chunk). From a stream only
        ``offset + count * itemsize`` bytes are read. More than the input holds is a
        ConversionError stating both.
    trailing : {"error", "ignore"}
        What to do when the bytes after ``offset`` are not a whole number of records
        (and no ``count`` is given): a LayoutError stating the sizes (default), or a
        warning saying how many bytes were skipped, where.

    A regular file is mapped, not read: if another program truncates it, converting
    the records (``to_soa``, ``to_device``) raises a ConversionError naming the file and
    the first record that is gone, instead of the process dying of SIGBUS.
    """
    layout = as_layout(layout)
    check_trailing(trailing)
    offset, count = check_offset(offset), check_count(count)
    itemsize = layout.itemsize
    name, size, mapped, data, start = _open(source, None if count is None else offset + count * itemsize)
    if count is None:
        whole = whole_records(name, size, offset, itemsize, trailing)
    else:
        whole = whole_records(name, size, offset, itemsize, "ignore", quiet=True)
        if count > whole:
            raise too_few(name, count, whole, itemsize, offset)
        whole = count
    nbytes = whole * itemsize
    if data is not None:  # a stream, already read
        return AoS(memoryview(data)[offset : offset + nbytes], layout)
    records = (
        AoS(b"", layout)
        if nbytes == 0
        else AoS(np.memmap(mapped, dtype=layout.dtype, mode="r", offset=start + offset, shape=(whole,)), layout)
    )
    if not isinstance(mapped, (str, os.PathLike)):  # a file object: left just after the records, as a read would
        mapped.seek(start + offset + nbytes)
    return records


def _whole_number(value, name, what, example):
    """``value`` as an int >= 0; else a LayoutError naming the argument, the value and the fix."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LayoutError(f"{name}={value!r} is not a whole number: {name} is {what}; give an int >= 0 ({example})")
    if value < 0:
        raise LayoutError(f"{name}={value} is negative: {name} is {what}; give an int >= 0 ({example})")
    return int(value)


def check_offset(offset, name="offset"):
    """``offset`` (bytes of header before the first record) as an int >= 0."""
    return _whole_number(
        offset, name, "the number of header bytes before the first record, from where the input starts", "0 for none"
    )


def check_count(count, name="count"):
    """``count`` (records to take; None for all) as an int >= 0 or None."""
    if count is None:
        return None
    return _whole_number(count, name, "the number of records to take", "None for all of them")


def too_few(name, count, whole, itemsize, offset):
    """The ConversionError for ``count`` records asked of an input holding ``whole``."""
    return ConversionError(
        f"{name} holds {whole} whole records of {itemsize} bytes after offset {offset}; count={count} asks for "
        f"more: give count={whole} or fewer (the number of records the file's header states), or check the "
        f"layout (record size {itemsize}) and the offset"
    )


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
        partial_record(
            f"{name} is {size} bytes: after the {offset}-byte header that is {whole} records of "
            f"{itemsize} bytes and {left} bytes left over",
            itemsize,
            left,
            trailing,
            stacklevel + 1,
            end=size,
        )
    return whole


def partial_record(message, itemsize, left, trailing, stacklevel=3, end=None):
    """Bytes after the last whole record: a LayoutError (``trailing="error"``) or a warning
    that they were skipped (``"ignore"``), at which byte of the input (``end``, the
    input's size, when known) and what ``count=`` is for. ``message`` states the sizes."""
    at = f" at byte {end - left:,} of the input" if end is not None else ""
    if trailing == "error":
        raise LayoutError(
            f"{message}; check the layout (record size {itemsize}) and the header offset; if the input has more "
            f"after its records (a trailer), pass count= with the number of records its header gives; or pass "
            f"trailing='ignore' to skip the partial record"
        )
    warnings.warn(
        f"{message}; skipped those {left} bytes{at}: if the input has more after its records (a trailer, "
        f"extended headers, another chunk), those were read as records too: pass count= with the number "
        f"of records its header gives",
        stacklevel=stacklevel,
    )


def _open(source, need=None):
    """``(name, size in bytes, path or file to map, bytes read from a stream, start)``;
    offsets count from ``start``: the start of a file given by path, the current position
    of a file object (its bytes before it are not the input's), the stream's remaining
    bytes. ``size`` counts from there too. From a stream at most ``need`` bytes are read
    (all when None)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode):
                with open(path, "rb") as f:
                    size = _size(f.fileno(), st)
                    if not stat.S_ISREG(st.st_mode) or maps(f.fileno(), size):
                        refuse_arrow(path, f.fileno(), size, _FIX_READ)
                        return path, size, path, None, 0
                    data = _read_stream(f, path, need)  # /proc, /sys: a size that is not the bytes'
                return path, len(data), None, data, 0
            if stat.S_ISDIR(st.st_mode):
                raise LayoutError(f"cannot read records from {path!r}: it is a directory; give a file")
            if stat.S_ISSOCK(st.st_mode):
                raise LayoutError(
                    f"cannot read records from {path!r}: it is a socket; read it with a socket "
                    f"client and pass the bytes (or a file object) instead"
                )
            if stat.S_ISCHR(st.st_mode) and need is None:
                raise LayoutError(_endless(path, "pass count= to read that many records"))
            with open(path, "rb") as f:  # a FIFO (or a device, up to count): read as a stream
                data = _read_stream(f, path, need)
            return path, len(data), None, data, 0
        except OSError as err:
            raise LayoutError(f"cannot read records from {path!r}: {err.strerror}") from None
    if not hasattr(source, "read"):
        raise LayoutError(f"read_records takes a path or a binary file object, got {type(source).__name__}")
    name = input_name(source, type(source).__name__)
    check_input(source, "source", name)
    try:
        fd = source.fileno()
        st = os.fstat(fd)
    except (OSError, io.UnsupportedOperation, ValueError, AttributeError):
        st = None
    if st is not None and stat.S_ISCHR(st.st_mode) and need is None:
        raise LayoutError(_endless(name, "pass count= to read that many records"))
    if st is not None and stat.S_ISREG(st.st_mode):
        try:
            start = _position(source)
            size = max(st.st_size - start, 0)
            if maps(fd, st.st_size):
                if size:
                    refuse_arrow(name, fd, size, _FIX_READ, start)
                return (f"{name} (from its position {start:,})" if start else name), size, source, None, start
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # it does not map: read it
    data = _read_stream(source, name, need)
    return name, len(data), None, data, 0


def input_name(f, default="the input"):
    """How messages name an input file object: its path, ``<stdin>``, ``file descriptor
    N`` for one opened from a descriptor (a pipe: ``open(fd, "rb")``, ``Popen.stdout``),
    else ``default``."""
    name = getattr(f, "name", None)
    if isinstance(name, int) and not isinstance(name, bool):
        return f"file descriptor {name}"
    return default if name is None else str(name)


def check_input(f, argument, name):
    """Refuse an input file object that cannot give bytes, before any is read: one that
    is closed, open only for writing, or in text mode; ``argument`` names the parameter
    (``src``, ``source``)."""
    if not hasattr(f, "read") and not hasattr(f, "readinto"):
        return
    if getattr(f, "closed", False) is True:
        raise LayoutError(f"{argument} {name} is closed; pass the file open for reading (open(path, 'rb')) or its path")
    if isinstance(f, io.TextIOBase):
        raise LayoutError(f"{argument} {name} is open in text mode; open it with 'rb'")
    readable = getattr(f, "readable", None)
    try:
        if callable(readable) and readable() is False:
            mode = getattr(f, "mode", None)
            said = f" (mode {mode!r})" if isinstance(mode, str) else ""
            raise LayoutError(
                f"{argument} {name} is open for writing only{said}; open it for reading "
                f"(open(path, 'rb')) or pass its path"
            )
    except (OSError, ValueError):
        pass  # it says nothing: its reads will


def maps(fd, size):
    """Whether a regular file of ``size`` bytes (``st_size``) is mapped rather than read:
    it has bytes and the kernel maps it. A /proc file says 0 bytes and has some, a /sys
    file says 4,096 and cannot be mapped (ENODEV): those are read as streams."""
    if size == 0:
        return False
    try:
        mmap.mmap(fd, 0, access=mmap.ACCESS_READ).close()
    except (OSError, ValueError):
        return False
    return True


def _position(f):
    """The current position of a file object (where its records start); a position
    kept in Python's buffer counts, not the descriptor's."""
    return f.tell() if f.seekable() else 0


def _size(fd, st):
    """Bytes in a regular file or a block device (whose ``st_size`` is 0)."""
    return st.st_size if stat.S_ISREG(st.st_mode) else os.lseek(fd, 0, os.SEEK_END)


def _endless(name, fix):
    return (
        f"{name} is a character device (like a terminal or /dev/zero), which may never end and has no size; "
        f"{fix}, or read the records from a file or a pipe"
    )


_FIX_READ = (
    "read it with pyarrow (pyarrow.parquet.read_table, pyarrow.ipc.open_file / open_stream), or turn it "
    "into records with layouts.convert(src, layout, 'out.bin')"
)


def _read_stream(f, name, need):
    """The bytes of a stream: all of them, or at most ``need``. All of a stream that
    turns out to be a Parquet or Arrow IPC file is refused (:func:`refuse_arrow`)."""
    if need is None:
        data = f.read()
    else:
        parts, got = [b""], 0
        while got < need:
            part = f.read(min(need - got, 1 << 24))  # a huge count: no huge buffer up front
            if not part or isinstance(part, str):
                parts.append(part or b"")
                break
            parts.append(part)
            got += len(part)
        data = parts[-1] if isinstance(parts[-1], str) else b"".join(parts)
    if isinstance(data, str):
        raise LayoutError(f"{name} is open in text mode; open it with 'rb'")
    if data is None:
        raise LayoutError(f"{name} is non-blocking and had no data; give a blocking file object")
    if need is None:
        view = memoryview(data)
        kind = arrow_kind(lambda start, n: bytes(view[start : start + n]), len(data))
        if kind is not None:
            raise LayoutError(_arrow_message(name, kind, _FIX_READ))
    return data


# ----------------------------------------------------------------- Parquet and Arrow inputs

_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # the end of an Arrow IPC stream
_SCHEMA_MAX = 1 << 20  # a longer first message is not taken for an IPC stream's schema


def arrow_kind(read, size):
    """``"a Parquet file"``, ``"an Arrow IPC file"``, ``"an Arrow IPC stream"`` or None.

    ``read(start, n)`` gives the input's bytes (fewer where it has fewer), ``size`` its
    length. A file counts as Parquet or IPC when it begins and ends with the format's
    magic bytes and the footer length before the final magic fits the file; as an IPC
    stream when it begins with a schema message pyarrow reads and ends with the
    end-of-stream marker. Records that happen to begin with the same bytes are not
    taken for one."""
    if size < 12:
        return None
    head, tail = read(0, 8), read(size - 16, 16) if size >= 16 else read(0, size)
    if head[:4] == b"PAR1" and tail[-4:] == b"PAR1":
        if int.from_bytes(tail[-8:-4], "little") <= size - 12:
            return "a Parquet file"
    if head[:6] == b"ARROW1" and tail[-6:] == b"ARROW1" and size >= 18:
        if int.from_bytes(tail[-10:-6], "little", signed=True) in range(0, size - 17):
            return "an Arrow IPC file"
    if head[:4] == b"\xff\xff\xff\xff" and tail[-8:] == _EOS and size >= 16:
        length = int.from_bytes(head[4:8], "little", signed=True)
        if 0 < length <= min(_SCHEMA_MAX, size - 16):
            import pyarrow as pa

            try:
                message = pa.ipc.read_message(pa.py_buffer(read(0, 8 + length)))
                if message.type == "schema":
                    return "an Arrow IPC stream"
            except (pa.ArrowException, ValueError, OSError):
                return None
    return None


def _pread(fd, n, start):
    """``n`` bytes at ``start`` (``os.pread`` where there is one; else the position moves)."""
    if hasattr(os, "pread"):
        return os.pread(fd, n, start)
    os.lseek(fd, start, os.SEEK_SET)
    return os.read(fd, n)


def _arrow_message(name, kind, fix):
    return f"{name} is {kind}, not raw records (it begins and ends as {kind} does); {fix}"


def refuse_arrow(name, fd, size, fix, start=0):
    """A LayoutError when the file open as ``fd`` (``size`` bytes from byte ``start``) is a
    Parquet or Arrow IPC file: reading its bytes as records would give garbage. ``fix``
    says what to do."""
    kind = arrow_kind(lambda at, n: _pread(fd, n, start + at), size)
    if kind is not None:
        raise LayoutError(_arrow_message(name, kind, fix))


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
        """``path``: the file's path, or a file descriptor open for writing (duplicated)."""
        if _FALLOCATE is None:
            self.fd = None
        else:
            self.fd = os.dup(path) if isinstance(path, int) else os.open(path, os.O_WRONLY)

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


# ----------------------------------------------------------------- where outputs go

_TMP = ".layouts-tmp"


def _tmp_name(name):
    """A temporary name beside ``name``, unique to this process and call: the PID (for
    telling whose it is) and 48 random bits (two threads, or PIDs reused in containers)."""
    return f".{name}.{os.getpid()}.{secrets.token_hex(6)}{_TMP}"


def _unnamed_supported():
    """Whether outputs can be unnamed (``O_TMPFILE``) files linked in through /proc."""
    return hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")


UNNAMED = _unnamed_supported()  # tests turn it off to exercise the named temporary files


def open_output(dst, *, overwrite=False, src=None):
    """Where a conversion writes: a :class:`FileOutput` (written whole or not at all) or
    a :class:`StreamOutput`, after the checks on ``dst`` (a path or a writable binary
    file object). ``src`` is the input (a path or file object), which ``dst`` may not be.

    - absent, or a symlink to nowhere: a new file (at the link's target);
    - a regular file, or a symlink to one: replaced as a whole, only with ``overwrite``;
      through a symlink the target is replaced and the link stays;
    - a FIFO, a character device (``/dev/null``, a terminal) or a path through
      ``/proc/*/fd`` (``/dev/stdout``): streamed into, nothing is replaced;
    - a directory, a block device, a socket, or the input itself: refused.
    """
    if isinstance(dst, (str, os.PathLike)):
        return _path_output(dst, overwrite, src)
    if not hasattr(dst, "write"):
        raise LayoutError(f"dst must be a path or a writable binary file object, got {type(dst).__name__}")
    name = str(getattr(dst, "name", type(dst).__name__))
    if isinstance(dst, io.TextIOBase):
        raise LayoutError(
            f"{name} is open in text mode; write to its binary buffer (sys.stdout.buffer) or open it with 'wb'"
        )
    try:
        st = os.fstat(dst.fileno())
    except (OSError, io.UnsupportedOperation, ValueError, AttributeError):
        st = None
    _not_the_input(name, st, src)
    return StreamOutput(dst, name, owned=False)


def _path_output(dst, overwrite, src):
    name = str(Path(dst))
    path = os.fspath(dst)
    try:
        st = os.stat(path)  # through symlinks
    except FileNotFoundError:
        st = None
    except OSError as err:  # a symlink loop, a path through a file, no permission
        raise LayoutError(f"cannot write {name}: {err.strerror}") from None
    if st is None:  # nothing there, or a symlink to nowhere: a new file at the target
        target = os.path.realpath(path) if os.path.islink(path) else path
        if not os.path.isdir(os.path.dirname(os.path.abspath(target))):
            where = f"the directory of {name}" if target == path else f"the directory of {target} ({name} links there)"
            raise LayoutError(f"{where} does not exist")
        return FileOutput(target, name, overwrite)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise LayoutError(f"{name} is a directory; give a file path for the output")
    _not_the_input(name, st, src)
    proc = _through_proc(path)
    if stat.S_ISREG(mode) and not proc:
        if not overwrite:
            raise LayoutError(f"{name} exists; pass overwrite=True (--overwrite) to replace it")
        return FileOutput(os.path.realpath(path) if os.path.islink(path) else path, name, overwrite=True)
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        # a pipe, a device or a file this process already has open (/dev/stdout): write into it, as a
        # shell does; O_APPEND keeps what a `>>` redirection has there. A FIFO waits for its reader here.
        flags = os.O_WRONLY | (os.O_APPEND if stat.S_ISREG(mode) else 0)
        try:
            fd = os.open(path, flags)
        except OSError as err:
            raise LayoutError(f"cannot write {name}: {err.strerror}") from None
        return StreamOutput(open(fd, "wb"), name, owned=True)
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    raise LayoutError(
        f"{name} is {kind}; layouts writes files, pipes and character devices, never over a "
        f"{kind.replace('a ', '', 1)}: give a file path for the output"
    )


def _through_proc(path):
    """Whether ``path`` leads through ``/proc/<pid>/fd`` (``/dev/stdout``, ``/dev/fd/1``):
    a file this process has open, which is written into, not replaced."""
    p = os.path.abspath(path)
    for _ in range(40):
        if p.startswith(("/proc/", "/dev/fd/")):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False


def _not_the_input(name, st, src):
    """Refuse an output that is the input file itself (also through a link, a hard link
    or another path)."""
    if st is None or src is None:
        return
    try:
        if isinstance(src, (str, os.PathLike)):
            other, src_name = os.stat(src), os.fspath(src)
        elif getattr(getattr(src, "raw", None), "source_stat", None) is not None:  # the command's standard input
            other, src_name = src.raw.source_stat, "(standard input)"
        else:
            other, src_name = os.fstat(src.fileno()), input_name(src)
    except (OSError, io.UnsupportedOperation, ValueError, AttributeError):
        return
    if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
        raise LayoutError(f"{name} is the input {src_name} itself (the same file); write the output to another path")


class FileOutput:
    """A regular file written whole or not at all.

    On Linux the bytes go to an unnamed file (``O_TMPFILE``) in the destination's
    directory, which :meth:`commit` links in (``linkat`` through ``/proc/self/fd``): a
    process killed before that leaves nothing behind, and :meth:`discard` frees the
    space at once. A new destination is linked in under its own name, which fails if
    another writer got there first; a replaced one is linked in under a unique
    temporary name and renamed over the old file (between those two calls a killed
    process would leave that complete temporary file). Elsewhere (or where the
    filesystem refuses ``O_TMPFILE``) the bytes go to a temporary file
    ``.NAME.PID.RANDOM.layouts-tmp`` beside the destination, renamed over it when
    complete and removed on an error; a killed process leaves it behind
    (docs/reliability.md says how to clean those).

    ``fd`` is the file's descriptor (kept by this object), ``native_path`` a path that
    opens the same file (for pyarrow's own file), ``written()`` its size so far.
    """

    stream = False

    def __init__(self, target, name, overwrite):
        self.name, self.overwrite = name, overwrite
        self.kept = False  # True once the complete file is in place
        self.directory, self.base = os.path.split(os.path.abspath(target))
        self.target = os.path.join(self.directory, self.base)
        self.fd = self.dirfd = self.tmp = None
        self.size = 0
        if UNNAMED:
            try:
                self.dirfd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
                self.fd = os.open(self.directory, os.O_TMPFILE | os.O_WRONLY, 0o666)
            except OSError:  # not here (an old kernel, a filesystem without it): a named file
                self._close_dir()
        if self.fd is None:
            self.fd, self.tmp = self._named()
        self.native_path = self.tmp if self.tmp is not None else f"/proc/self/fd/{self.fd}"

    def _named(self):
        for _ in range(100):
            tmp = os.path.join(self.directory, _tmp_name(self.base))
            try:
                return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
            except FileExistsError:
                continue
            except OSError as err:
                raise OSError(
                    err.errno, f"cannot write {self.name}: creating a file in {self.directory} failed: {err.strerror}"
                ) from None
        raise OSError(errno.EEXIST, f"cannot write {self.name}: no free temporary name in {self.directory}")

    def records_file(self):
        """A buffered binary file over :attr:`fd` (closing it leaves ``fd`` open)."""
        return open(self.fd, "wb", closefd=False)

    def written(self):
        """Bytes in the file so far."""
        try:
            return os.fstat(self.fd).st_size if self.fd is not None else self.size
        except OSError:
            return self.size

    def commit(self):
        """Put the complete file in place (atomically), then close it. A Ctrl-C in the few
        system calls this takes waits until they are done (nothing half-placed is left)."""
        with deferred_interrupts():
            try:
                self.size = os.fstat(self.fd).st_size
                if self.tmp is None:
                    self._link_unnamed()
                else:
                    self._move_named()
                self.kept = True
            finally:
                self.discard()

    def _appeared(self):
        return LayoutError(
            f"{self.name} appeared while converting (another program wrote it); pass overwrite=True "
            f"(--overwrite) to replace it; this output was not kept"
        )

    def _link_unnamed(self):
        source = f"/proc/self/fd/{self.fd}"
        if not self.overwrite:
            try:
                os.link(source, self.base, dst_dir_fd=self.dirfd)  # a dst_dir_fd makes it linkat(..., FOLLOW)
            except FileExistsError:
                raise self._appeared() from None
            return
        for _ in range(100):
            tmp = _tmp_name(self.base)
            try:
                os.link(source, tmp, dst_dir_fd=self.dirfd)
                break
            except FileExistsError:
                continue
        try:
            os.replace(tmp, self.base, src_dir_fd=self.dirfd, dst_dir_fd=self.dirfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.dirfd)
            except FileNotFoundError:
                pass
            raise

    def _move_named(self):
        tmp, self.tmp = self.tmp, None
        try:
            if self.overwrite:
                os.replace(tmp, self.target)
                return
            try:
                os.link(tmp, self.target)  # fails if the destination appeared meanwhile
            except FileExistsError:
                raise self._appeared() from None
            except (OSError, NotImplementedError):  # no hard links here (FAT, some network filesystems)
                if os.path.lexists(self.target):
                    raise self._appeared() from None
                os.replace(tmp, self.target)
        except BaseException:
            self.tmp = tmp  # removed by discard
            raise
        os.unlink(tmp)

    def discard(self):
        """Close the file and drop it (an unnamed file's space is freed here)."""
        fd, self.fd = self.fd, None
        tmp, self.tmp = self.tmp, None
        try:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
        finally:
            if fd is not None:
                os.close(fd)
            self._close_dir()

    def _close_dir(self):
        dirfd, self.dirfd = self.dirfd, None
        if dirfd is not None:
            os.close(dirfd)


class StreamOutput:
    """A pipe, a device or a caller's file object, written as a stream: nothing is
    replaced, nothing is atomic (what was written before an error stays written). The
    caller's file object is flushed, not closed; one opened here is closed."""

    stream = True
    fd = native_path = None
    kept = False  # what was written stays written, but nothing is put in place

    def __init__(self, file, name, owned):
        self.name, self.owned = name, owned
        self.file = _Counting(file)

    def records_file(self):
        return self.file

    def written(self):
        return self.file.count

    def commit(self):
        try:
            self.file.flush()
        finally:
            if self.owned:
                self.owned = False
                self.file.raw.close()

    def discard(self):
        if self.owned:
            self.owned = False
            try:
                self.file.raw.close()
            except OSError:  # the reader has gone: what is left in the buffer cannot go anywhere
                pass


class _Counting:
    """A binary file that counts the bytes written through it: pyarrow writes here (its
    file wrapper keeps its own position, so nothing needs to seek), and so do records."""

    def __init__(self, raw):
        self.raw, self.count = raw, 0

    def write(self, data):
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            n = self.raw.write(view[done:])
            if n is None:  # a non-blocking file with no room
                raise BlockingIOError(errno.EAGAIN, "the output is non-blocking and full; give a blocking file")
            if n <= 0:  # (asked again, it would say the same: an endless loop)
                raise OSError(errno.EIO, f"the output's write() took no bytes of {len(view) - done} (it returned {n})")
            done += n
        self.count += done
        return done

    def flush(self):
        self.raw.flush()

    def tell(self):
        return self.count

    def writable(self):
        return True

    def seekable(self):
        return False

    @property
    def closed(self):
        return getattr(self.raw, "closed", False)

    def close(self):  # pyarrow's wrapper may close it: the caller's file stays open
        pass
