"""The CUDA backend: records and arenas in GPU memory, transposed by :mod:`kernels.cuda`.

A device arena is one allocation from the pool (:mod:`layouts._cuda.device`) whose
buffers start at ``HEAD`` (:mod:`layouts._cuda.arena`); an SoA's column buffers there
are :class:`~layouts._plan.Span` offsets into it, which the copy plans hold and
the kernels add to the arena's address. Importing this module imports no GPU library:
CuPy and Numba CUDA come in on first use, through :mod:`layouts._cuda.device`.
"""

import contextlib

import numpy as np

from .._cuda import device as _device
from .._cuda.arena import HEAD, device_tables, packing, spans
from .._cuda.c_device import ARROW_DEVICE_CUDA
from .._errors import LayoutError
from .._faults import guarded_reads
from .._layout import Layout
from .._plan import ALIGN, ColumnBuffers, Span, forward_ops, reverse_ops

__all__ = ["CudaBackend", "BACKEND"]


class CudaBackend:
    """GPU memory (see :class:`layouts._backends.Backend` for what each method does)."""

    name = "cuda"
    host = False
    arena_name = "device arena"

    def __reduce__(self):
        return _backend, ()

    def __repr__(self):
        return "<backend cuda>"

    # ----------------------------------------------------------------- kernels
    def kernels(self):
        return _device.kernels()

    def kernels_cached(self, reverse):
        return None  # compiled per launch by the driver: nothing on disk to ask about

    def compile_kernels(self, progress):
        return {}

    # ------------------------------------------------------------------ memory
    def allocate(self, arena):
        return _device.empty(HEAD + arena.nbytes)

    def adopt_records(self, obj, layout):
        names = getattr(getattr(obj, "dtype", None), "names", None)
        if layout is None:
            if names is None:
                raise LayoutError(
                    f"AoS of device memory ({type(obj).__name__}) needs layout=: a Layout or a structured dtype"
                )
            layout = Layout.from_dtype(obj.dtype)
        raw = _device.wrap(obj)
        if raw.shape[0] % layout.itemsize:
            raise LayoutError(
                f"a device buffer of {raw.shape[0]} bytes is not a whole number of {layout.itemsize}-byte "
                f"records: {raw.shape[0] // layout.itemsize} records and {raw.shape[0] % layout.itemsize} "
                f"bytes left over; pass the buffer cut to a multiple of the record size"
            )
        return raw, layout

    def length(self, records, itemsize):
        return records.shape[0] // itemsize

    def new_records(self, layout, n):
        nbytes = n * layout.itemsize
        target = _device.empty(nbytes)  # whole 64 bytes: the kernels write uint32 words
        return target, target[:nbytes]

    def read(self, memory, start, nbytes):
        return _device.to_host(memory[HEAD + start :], nbytes)

    def write(self, memory, start, data):
        raw = data.view(np.uint8).reshape(-1)
        memory[HEAD + start : HEAD + start + raw.size].copy_to_device(raw)

    def claims(self, array, what):
        first = _device.pointer(array)
        return [(self.name, first, first + array.shape[0] * array.dtype.itemsize, what)]

    def guarded(self, records, itemsize):
        return contextlib.nullcontext()  # device memory is not a mapped file

    def overlaps(self, a, b):
        (_, lo_a, hi_a, _), (_, lo_b, hi_b, _) = self.claims(a, "")[0], self.claims(b, "")[0]
        return lo_a < hi_b and lo_b < hi_a

    # -------------------------------------------------------------- transposes
    def aos_to_soa(self, records, layout, n, arena, memory, nulls, *, threads=None):
        ops, offs, keep = forward_ops(arena, HEAD, nulls)
        tables = device_tables(ops, keep)
        words = _device.words(records, n * layout.itemsize)
        return self.kernels().aos_to_soa(words, layout.itemsize, n, ops, offs, memory, tables)

    def soa_to_aos(self, target, layout, n, columns, memory, fills, truncate, *, threads=None):
        ops, offs, keep = reverse_ops(layout, columns, fills, truncate)
        tables = device_tables(ops, keep)
        return self.kernels().soa_to_aos(target.view(np.uint32), layout.itemsize, n, ops, offs, memory, tables)

    def arena_columns(self, arena, memory, n, dictionaries):
        return [spans(arena, i, n, dictionaries.get(i)) for i in range(len(arena.layout.fields))]

    # ------------------------------------------------------------------- moves
    def records_to_host(self, records, layout):
        return _device.to_host(records, records.shape[0]).view(layout.dtype)

    def records_from_host(self, host, layout):
        with guarded_reads(host, layout.itemsize):  # a file mapped by read_records may shrink
            raw = _device.to_device(np.ascontiguousarray(host))
        return raw[: host.shape[0] * layout.itemsize]

    def columns_to_host(self, memory, columns):
        """The whole device allocation in one transfer, to 64-byte-aligned host memory;
        the columns become pyarrow Buffers over it. Returns the arena part (after HEAD)."""
        raw = np.empty(memory.shape[0] + ALIGN, dtype=np.uint8)
        skip = -raw.ctypes.data % ALIGN
        host = _device.to_host(memory, out=raw[skip : skip + memory.shape[0]])

        base = host.ctypes.data

        def buf(span):
            return None if span is None else Span(base + span.address, span.size, host)

        moved = [
            ColumnBuffers(
                c.type, c.length, buf(c.validity), buf(c.offsets), buf(c.data), c.offset, c.kind, c.dictionary
            )
            for c in columns
        ]
        return host[HEAD:], moved

    def columns_from_host(self, memory, columns):
        """An arena goes as it is, straight after the head (one transfer); columns
        borrowed from Arrow (``memory`` None) are packed first (:func:`packing`)."""
        if memory is not None:
            size = memory.nbytes
            device = _device.empty(HEAD + size)
            if size:
                device[HEAD : HEAD + size].copy_to_device(memory)
            base = memory.ctypes.data - HEAD

            def span(b):
                return None if b is None else Span(b.address - base, b.size)

            return device, [
                ColumnBuffers(
                    c.type, c.length, span(c.validity), span(c.offsets), span(c.data), c.offset, c.kind, c.dictionary
                )
                for c in columns
            ]
        copies, nbytes, moved = packing(columns)
        host = np.zeros(nbytes, dtype=np.uint8)
        for raw, at in copies:
            host[at : at + raw.size] = raw
        return _device.to_device(host), moved

    # ----------------------------------------------------------------- exports
    def column_interface(self, memory, buffers, dtype, shape, name):
        """``__cuda_array_interface__`` (version 3) of a column of fixed-width values."""
        if dtype is None:
            raise AttributeError(
                f"column {name!r} is {buffers.type} in Arrow (bit-packed, date32 or var-length), which has "
                f"no __cuda_array_interface__; use soa.to_cudf() or soa.__arrow_c_device_array__()"
            )
        if dtype.kind in "mM":
            dtype = np.dtype("<i8")  # CuPy and Numba take the counts; the unit is the Arrow type's
        ptr = _device.pointer(memory) + buffers.data.address + buffers.offset * dtype.itemsize
        return {
            "shape": shape,
            "typestr": dtype.str,
            "descr": [("", dtype.str)],
            "data": (ptr, False),
            "strides": None,
            "version": 3,
            "stream": None,
        }

    def dlpack(self, column, **kwargs):
        return _device._cupy().asarray(column).__dlpack__(**kwargs)

    def dlpack_device(self):
        return _device.dlpack_device()

    def arrow_device(self, memory):
        return _device.pointer(memory), ARROW_DEVICE_CUDA, _device.dlpack_device()[1]

    def export_buffer(self, buffer):
        moved = _device.to_device(np.frombuffer(buffer, dtype=np.uint8))
        return moved, _device.pointer(moved)

    def sync(self):
        _device.cuda().synchronize()


def _backend():
    """The registry's CUDA backend (unpickling gives the one instance)."""
    return BACKEND


BACKEND = CudaBackend()
