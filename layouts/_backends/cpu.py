"""The CPU backend: records and arenas in host memory, transposed by :mod:`kernels.cpu`.

Column buffers of an SoA over a host arena are pyarrow Buffers over that arena, so
NumPy, Arrow and Python read them directly; their addresses are host addresses, which
the copy plans hold as they are.
"""

import numpy as np

from .._cuda.c_device import ARROW_DEVICE_CPU
from .._errors import LayoutError
from .._faults import guarded_reads
from .._layout import Layout
from .._plan import ColumnBuffers, Span, byte_range, file_span, forward_ops, reverse_ops

__all__ = ["CpuBackend", "BACKEND"]


class CpuBackend:
    """Host memory (see :class:`layouts._backends.Backend` for what each method does)."""

    name = "cpu"
    host = True
    arena_name = "arena"

    def __reduce__(self):
        return _backend, ()

    def __repr__(self):
        return "<backend cpu>"

    # ----------------------------------------------------------------- kernels
    def kernels(self):
        from ..kernels import cpu

        return cpu

    def kernels_cached(self, reverse):
        try:
            return not self.kernels().missing(reverse=reverse)
        except Exception:  # noqa: BLE001 - another Numba's internals: unknown
            return None

    def compile_kernels(self, progress):
        return self.kernels().precompile(progress)

    # ------------------------------------------------------------------ memory
    def allocate(self, arena):
        return arena.allocate()

    def adopt_records(self, obj, layout):
        if isinstance(obj, np.ndarray) and obj.dtype.names is not None:
            if layout is None:
                layout = Layout.from_dtype(obj.dtype)
            elif obj.dtype != layout.dtype:
                raise LayoutError(
                    f"the array's dtype {obj.dtype} differs from the layout's {layout.dtype}; "
                    f"pass layout=None to use the array's own, or view the array as layout.dtype"
                )
            return _records(obj), layout
        if layout is None:
            raise LayoutError(f"AoS of a raw {type(obj).__name__} needs layout=: a Layout or a structured dtype")
        return _from_buffer(obj, layout), layout

    def length(self, records, itemsize):
        return records.shape[0]

    def new_records(self, layout, n):
        records = np.empty(n, dtype=layout.dtype)
        return records, records

    def read(self, memory, start, nbytes):
        return memory[start : start + nbytes]

    def write(self, memory, start, data):
        raw = data.view(np.uint8).reshape(-1)
        target = memory[start : start + raw.size]
        if not np.may_share_memory(target, raw):  # a view read() gave and changed in place is there already
            target[:] = raw

    def claims(self, array, what):
        return [(self.name, *byte_range(array), what)] + file_span(array, what)

    def guarded(self, records, itemsize):
        return guarded_reads(records, itemsize)

    def overlaps(self, a, b):
        (lo_a, hi_a), (lo_b, hi_b) = byte_range(a), byte_range(b)
        return lo_a < hi_b and lo_b < hi_a

    # -------------------------------------------------------------- transposes
    def aos_to_soa(self, records, layout, n, arena, memory, nulls, *, threads=None):
        ops, offs, keep = forward_ops(arena, memory.ctypes.data, nulls)
        src = records.ctypes.data  # not __array_interface__, which describes every field
        fault = self.kernels().aos_to_soa(
            src,
            records.strides[0] if n else 1,
            n,
            ops,
            offs,
            threads=threads,
            owners=(records, memory, ops, offs, keep),
        )
        del keep
        return fault

    def soa_to_aos(self, target, layout, n, columns, memory, fills, truncate, *, threads=None, skip=()):
        """The records of the columns written into ``target``; None, or the first fault
        ``(row, field, code)`` found. The fields in ``skip`` are left out (not written)."""
        ops, offs, keep = reverse_ops(layout, columns, fills, truncate)
        rows = [i for i in range(len(ops)) if i not in skip]
        if skip:
            ops = ops[rows]
        zero = bool(layout.holes) or any(f.kind == "bits" for f in layout.fields)
        fault = self.kernels().soa_to_aos(
            target.ctypes.data,
            layout.itemsize,
            n,
            ops,
            offs,
            zero=zero,
            threads=threads,
            owners=(target, columns, memory, ops, offs, keep),
        )
        del keep
        return None if fault is None else (fault[0], rows[fault[1]], fault[2])

    def arena_columns(self, arena, memory, n, dictionaries):
        """Each buffer cut to the bytes the n records use (:meth:`Arena.used`), so that no
        export shows a byte past them, and its padding zeroed."""
        used = arena.used(memory, n)
        arena.zero_padding(memory, used)

        base = memory.ctypes.data

        def buf(i, name):
            spec = arena.buffers[i].get(name)
            return None if spec is None else Span(base + spec[0], used[i][name], memory)

        return [
            ColumnBuffers(
                arena.arrow_type(i),
                n * f.count,
                buf(i, "validity"),
                buf(i, "offsets"),
                buf(i, "data"),
                0,
                f.kind,
                dictionaries.get(i),
            )
            for i, f in enumerate(arena.layout.fields)
        ]

    # ------------------------------------------------------------------- moves
    def records_to_host(self, records, layout):
        return records

    def records_from_host(self, host, layout):
        return host

    def columns_to_host(self, memory, columns):
        return memory, list(columns)

    def columns_from_host(self, memory, columns):
        return memory, list(columns)

    # ----------------------------------------------------------------- exports
    def column_interface(self, memory, buffers, dtype, shape, name):
        raise AttributeError(f"column {name!r} is on the CPU; it has __array_interface__ via numpy.asarray")

    def dlpack(self, column, **kwargs):
        return column.to_numpy(copy=False).__dlpack__(**kwargs)

    def dlpack_device(self):
        return (1, 0)  # kDLCPU

    def arrow_device(self, memory):
        return 0, ARROW_DEVICE_CPU, -1

    def export_buffer(self, buffer):
        return buffer, buffer.address

    def sync(self):
        """Host work is done when the call returns: nothing is queued."""


def _records(arr):
    """A structured array as a 1-D array of records (checked: no overlap, no backwards)."""
    if arr.ndim == 0:
        arr = arr.reshape(1)
    elif arr.ndim > 1:
        if not arr.flags.c_contiguous:
            raise LayoutError(
                f"a {arr.ndim}-D structured array must be C-contiguous to be read as records; "
                f"use np.ascontiguousarray(a).reshape(-1)"
            )
        arr = arr.reshape(-1)
    if arr.shape[0] > 1 and arr.strides[0] < arr.dtype.itemsize:
        raise LayoutError(
            f"records overlap or run backwards (stride {arr.strides[0]}, itemsize "
            f"{arr.dtype.itemsize}); use np.ascontiguousarray(a)"
        )
    return arr


def _from_buffer(obj, layout):
    """Records of ``layout`` over the bytes of a buffer-protocol object (no copy)."""
    if isinstance(obj, np.ndarray) and not obj.flags.c_contiguous:
        raise LayoutError("a raw record buffer must be C-contiguous; use np.ascontiguousarray(buf)")
    try:
        view = memoryview(obj)
    except TypeError as err:
        raise LayoutError(
            f"AoS takes a structured array or an object with the buffer protocol, got {type(obj).__name__}"
        ) from err
    size, itemsize = view.nbytes, layout.itemsize
    if size % itemsize:
        raise LayoutError(
            f"a buffer of {size} bytes is not a whole number of {itemsize}-byte records: "
            f"{size // itemsize} records and {size % itemsize} bytes left over; pass the "
            f"buffer cut to a multiple of the record size"
        )
    return np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view, dtype=layout.dtype)


def _backend():
    """The registry's CPU backend (unpickling gives the one instance)."""
    return BACKEND


BACKEND = CpuBackend()
