"""The CPU host functions :func:`aos_to_soa` and :func:`soa_to_aos`, and the kernels they
call compiled ahead of time (:func:`precompile`, :func:`missing`)."""

import time

import numpy as np

from ..plan import (
    KIND,
    NCOLS,
    OFFSETS,
    P2,
    STRING_KINDS,
)
from ..threads import chunk_starts, run_chunks
from .forward import _compact_strings, _forward_rows
from .memory import STAGE_RECORD_MAX, STREAM_BYTES, _set_offset
from .reverse import _reverse_rows


def aos_to_soa(src, stride, n, ops, offs, *, threads=None, owners=None):
    """Scatter ``n`` records at address ``src`` into the column buffers named by ``ops``.

    Parameters
    ----------
    src : int
        Address of the first record.
    stride : int
        Bytes from one record to the next (the itemsize for contiguous records).
    n : int
        Number of records.
    ops, offs : numpy.ndarray
        The copy plan (see :mod:`kernels.plan`).
    threads : int, optional
        Threads to use; defaults to :func:`default_threads`.
    owners : object, optional
        What owns the memory at those addresses (arrays, buffers): held until no
        worker thread uses it, also when the call is interrupted.

    Returns
    -------
    None, or ``(row, op, code)`` of the first value that could not be converted.
    String columns' offsets are final on return (``None``) only. A KeyboardInterrupt
    stops the worker threads at their next block of rows; it is raised once none runs.
    """
    starts = chunk_starts(n, stride, threads)
    stream = n * stride >= STREAM_BYTES and stride <= STAGE_RECORD_MAX
    fault = run_chunks(_forward_rows, starts, (src, stride, ops, offs, stream), owners)
    if fault is None:
        for j in range(ops.shape[0]):
            if ops[j, KIND] in STRING_KINDS:
                if n:
                    _compact_strings(ops[j], starts, stream)
                else:  # no row wrote it: an empty column's one offset is 0
                    _set_offset(ops[j, OFFSETS], 0, ops[j, P2], 0)
    return fault


def soa_to_aos(dst, itemsize, n, ops, offs, *, zero=True, threads=None, owners=None):
    """Gather ``n`` records into the contiguous buffer at address ``dst`` from the columns.

    ``zero=True`` clears each record first, so padding bytes come out as zeros.
    Returns ``None`` or ``(row, op, code)`` of the first value that could not be written.
    ``owners`` and interrupts as in :func:`aos_to_soa`.
    """
    starts = chunk_starts(n, itemsize, threads)
    stream = n * itemsize >= STREAM_BYTES
    return run_chunks(_reverse_rows, starts, (dst, itemsize, ops, offs, zero, stream), owners)


# ------------------------------------------------------------- compiled ahead of time


def _entries():
    """The kernels called from Python, each with arguments of the types the host functions
    above pass it (no rows: a call runs nothing). One signature each, so they can be
    compiled before they are needed: ``(name, kernel, arguments)``."""
    ops, offs = np.zeros((1, NCOLS), dtype=np.int64), np.zeros(1, dtype=np.int64)
    err, stop, starts = np.full(3, -1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return [
        ("records -> columns", _forward_rows, (0, 1, starts[0], starts[0], ops, offs, False, err, stop)),
        ("strings", _compact_strings, (ops[0], starts, False)),
        ("columns -> records", _reverse_rows, (0, 1, starts[0], starts[0], ops, offs, True, False, err, stop)),
    ]


def _signature(kernel, args):
    from numba import typeof

    return tuple(typeof(a) for a in args)


def missing(reverse=True):
    """Names of the kernels that the next conversion would compile (none is on disk for
    this machine: not shipped for this platform and versions, not cached here yet),
    found without compiling or loading anything. ``reverse=False``: records -> columns only."""
    names = []
    for name, kernel, args in _entries():
        if not reverse and kernel is _reverse_rows:
            continue
        sig = _signature(kernel, args)
        if sig in kernel.overloads:
            continue
        cache = kernel._cache
        holds = getattr(cache, "holds", None)
        if holds is None or not holds(sig, kernel.targetctx.codegen().magic_tuple()):
            names.append(name)
    return names


def precompile(progress=None):
    """Load every kernel, compiling those that are on disk nowhere (see :func:`missing`)
    and saving them for the next process. ``progress(name, i, n)`` is called before
    kernel i of n is loaded or compiled. Returns ``{name: seconds}``."""
    entries, took = _entries(), {}
    for i, (name, kernel, args) in enumerate(entries):
        if progress is not None:
            progress(name, i, len(entries))
        t0 = time.perf_counter()
        kernel(*args)
        took[name] = time.perf_counter() - t0
    return took
