"""AoS: records in one buffer (array of structures)."""

import numpy as np
import pyarrow as pa

from ._backends import check_device, kernels_for
from ._errors import LayoutError
from ._faults import forward_error
from ._layout import Layout
from ._plan import Arena, forward_ops

__all__ = ["AoS", "as_layout", "checked_nulls"]


def checked_nulls(layout, nulls):
    """``nulls`` as a dict, after checking that it names leaf fields of ``layout``."""
    nulls = dict(nulls or {})
    unknown = set(nulls) - set(layout.names)
    if unknown:
        raise LayoutError(f"nulls names {sorted(unknown)}, which are not leaf fields; leaves are {layout.names}")
    return nulls


def as_layout(layout):
    """A Layout from a Layout, a NumPy dtype, or anything ``numpy.dtype`` accepts."""
    return layout if isinstance(layout, Layout) else Layout.from_dtype(layout)


class AoS:
    """Records one after another in one buffer, described by a :class:`Layout`.

    Parameters
    ----------
    obj : numpy structured array, any object with the buffer protocol, or GPU memory
        The records: a structured array (a 1-D strided view is fine), ``bytes``,
        ``bytearray``, ``memoryview``, ``mmap`` or a ``numpy.memmap``; or a C-contiguous
        device buffer with ``__cuda_array_interface__`` (CuPy, Numba, PyTorch), whose
        bytes are the records (then :attr:`device` is ``"cuda"``). Nothing is copied.
    layout : Layout or numpy.dtype, optional
        Required for raw buffers; for a structured array it must match its dtype.

    Examples
    --------
    >>> import numpy as np, layouts as lo
    >>> raw = bytes(32)
    >>> aos = lo.AoS(raw, layout=np.dtype([("a", "<i8"), ("b", "<f8")]))
    >>> len(aos), aos.layout.itemsize
    (2, 16)
    """

    device = "cpu"

    def __init__(self, obj, layout=None):
        if isinstance(obj, AoS):
            obj, layout = obj.array, obj.layout if layout is None else layout
        layout = None if layout is None else as_layout(layout)
        if _on_gpu(obj):
            self._init_device(obj, layout)
            return
        if isinstance(obj, np.ndarray) and obj.dtype.names is not None:
            if layout is None:
                layout = Layout.from_dtype(obj.dtype)
            elif obj.dtype != layout.dtype:
                raise LayoutError(
                    f"the array's dtype {obj.dtype} differs from the layout's {layout.dtype}; "
                    f"pass layout=None to use the array's own, or view the array as layout.dtype"
                )
            array = _records(obj)
        else:
            if layout is None:
                raise LayoutError(
                    f"AoS of a raw {type(obj).__name__} needs layout=: a Layout or a structured dtype"
                )
            array = _from_buffer(obj, layout)
        self.layout, self.array = layout, array

    def _init_device(self, obj, layout):
        from ._cuda import device as _device

        names = getattr(getattr(obj, "dtype", None), "names", None)
        if layout is None:
            if names is None:
                raise LayoutError(
                    f"AoS of device memory ({type(obj).__name__}) needs layout=: a Layout or a structured dtype")
            layout = Layout.from_dtype(obj.dtype)
        raw = _device.wrap(obj)
        if raw.shape[0] % layout.itemsize:
            raise LayoutError(
                f"a device buffer of {raw.shape[0]} bytes is not a whole number of {layout.itemsize}-byte "
                f"records: {raw.shape[0] // layout.itemsize} records and {raw.shape[0] % layout.itemsize} "
                f"bytes left over; pass the buffer cut to a multiple of the record size")
        self.layout, self.array, self.device = layout, raw, "cuda"

    def __len__(self):
        if self.device == "cuda":
            return self.array.shape[0] // self.layout.itemsize
        return self.array.shape[0]

    @property
    def nbytes(self):
        """Bytes of record data (length * itemsize)."""
        return len(self) * self.layout.itemsize

    def __repr__(self):
        return f"<AoS {len(self)} records x {self.layout.itemsize} bytes on {self.device}>"

    def __array__(self, dtype=None, copy=None):
        self._on_host("__array__")
        if copy:
            return self.array.astype(dtype or self.array.dtype, copy=True)
        return self.array if dtype is None else self.array.astype(dtype, copy=False)

    def to_numpy(self):
        """The records as a NumPy structured array (a view, no copy)."""
        self._on_host("to_numpy")
        return self.array

    def _on_host(self, what):
        if self.device != "cpu":
            raise LayoutError(f"AoS.{what}: the records are on the GPU; call .to_device('cpu') first (a copy)")

    def to_device(self, device):
        """The records on ``device`` (``"cpu"`` or ``"cuda"``): ``self`` if they are
        there already, else a copy made in one transfer."""
        device = check_device(device, self.device)
        if device == self.device:
            return self
        from ._cuda import device as _device

        if device == "cuda":
            raw = _device.to_device(np.ascontiguousarray(self.array))
            return AoS(raw[: self.nbytes], self.layout)
        host = _device.to_host(self.array, self.nbytes)
        return AoS(host.view(self.layout.dtype), self.layout)

    def to_soa(self, *, nulls=None, out=None, threads=None, device=None):
        """Transpose the records into Arrow columns, in one pass over them.

        Parameters
        ----------
        nulls : dict, optional
            Sentinel values per leaf name that mean "missing", e.g.
            ``{"qty": -1, "px": float("nan")}``: those values become nulls (an Arrow
            validity bitmap), in the same pass. datetime64 ``NaT`` is always null.
        out : SoA, optional
            An SoA made earlier by ``to_soa`` with the same layout and ``nulls`` keys and
            at least as many records: its arena is reused (no allocation). The result
            shares that arena, so earlier exports of ``out`` see the new values.
        threads : int, optional
            CPU threads to use (default: all this process may use).
        device : {"cpu", "cuda"}, optional
            Where to convert; defaults to where the records are. Records on the CPU
            converted on ``"cuda"`` go to the GPU in one transfer, and the SoA stays
            there; records on the GPU converted on ``"cpu"`` come back first.

        Returns
        -------
        SoA
            Columns in one 64-byte-aligned arena.
        """
        nulls = checked_nulls(self.layout, nulls)
        device = check_device(device, self.device)
        if device == "cuda":
            from ._cuda import transpose as _gpu

            return _gpu.forward(self.to_device("cuda"), nulls, out)
        if self.device != "cpu":
            return self.to_device("cpu").to_soa(nulls=nulls, out=out, threads=threads)
        backend = kernels_for(device)
        n = len(self)
        if out is None:
            arena = Arena(self.layout, n, frozenset(nulls))
            memory = arena.allocate()
        else:
            arena, memory = _reusable(out, self.layout, n, frozenset(nulls))
        ops, offs, keep = forward_ops(arena, memory.ctypes.data, nulls)
        src = self.array.__array_interface__["data"][0]
        fault = backend.aos_to_soa(src, self.array.strides[0] if n else 1, n, ops, offs, threads=threads)
        del keep
        if fault is not None:
            raise forward_error(self.layout, self.array, fault)
        return soa_over_arena(self.layout, n, arena, memory, nulls, self.array)


def soa_over_arena(layout, n, arena, memory, nulls, records):
    """The host SoA over an arena the forward kernels just wrote (``memory``, host
    bytes), with each enum column's dictionary made from its indices (which may change,
    see :func:`_enum_dictionary`); ``records`` are the records converted."""
    from ._soa import SoA

    dictionaries = {}
    for i, f in enumerate(layout.fields):
        if f.kind == "enum":
            start, size = arena.buffers[i]["data"]
            idx = memory[start : start + size].view(np.int32)[: n * f.count]
            dictionaries[i] = _enum_dictionary(f, idx, lambda: records)[0]
    return SoA._from_arena(layout, n, arena, memory, nulls, dictionaries)


def _enum_dictionary(field, idx, records):
    """The dictionary of an enum column just written: the enumerator names, then the
    text of every value that has no enumerator (the kernel marked those -1), so that
    no value is lost; their indices are set in ``idx`` (the host int32 indices).
    ``records()`` gives the host records, asked for only when such values exist.
    Returns the dictionary and whether ``idx`` changed."""
    names = [name for _, name in field.enum]
    bad = np.flatnonzero(idx < 0)
    if len(bad):
        rows, k = np.divmod(bad, field.count)
        raw = np.ascontiguousarray(records()[rows]).view(np.uint8).reshape(len(rows), -1)
        cols = field.element_offsets()[k][:, None] + np.arange(field.width)
        values = np.take_along_axis(raw, cols, axis=1).copy().view(field.dtype).ravel()
        extra, inverse = np.unique(values, return_inverse=True)
        idx[bad] = len(names) + inverse.ravel()
        names += [str(int(v)) for v in extra]
    return pa.array(names, type=pa.string()), len(bad) > 0


def _on_gpu(obj):
    """Whether obj is device memory (without importing anything GPU-related for host data)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    return type(obj).__name__ in ("FakeCUDAArray", "DeviceNDArray")


def _records(arr):
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
    if isinstance(obj, np.ndarray) and not obj.flags.c_contiguous:
        raise LayoutError("a raw record buffer must be C-contiguous; use np.ascontiguousarray(buf)")
    try:
        view = memoryview(obj)
    except TypeError as err:
        raise LayoutError(
            f"AoS takes a structured array or an object with the buffer protocol, got "
            f"{type(obj).__name__}"
        ) from err
    size, itemsize = view.nbytes, layout.itemsize
    if size % itemsize:
        raise LayoutError(
            f"a buffer of {size} bytes is not a whole number of {itemsize}-byte records: "
            f"{size // itemsize} records and {size % itemsize} bytes left over; pass the "
            f"buffer cut to a multiple of the record size"
        )
    return np.frombuffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view, dtype=layout.dtype)


def _reusable(out, layout, n, nullable, device="cpu"):
    """The arena of ``out`` if it can take n records of layout with these nulls."""
    arena = getattr(out, "_arena", None)
    if arena is None or out._memory is None:
        raise LayoutError("out= must be an SoA made by AoS.to_soa (one that owns an arena)")
    if out.device != device:
        raise LayoutError(f"out= is on {out.device}; these records convert on {device}: pass an SoA made there")
    if arena.layout != layout:
        raise LayoutError(f"out= has layout {arena.layout!r}; these records have {layout!r}")
    if arena.nullable != nullable:
        raise LayoutError(
            f"out= was made with nulls for {sorted(arena.nullable)}; this call asks for "
            f"{sorted(nullable)}: pass the same nulls keys"
        )
    if arena.capacity < n:
        raise LayoutError(f"out= holds {arena.capacity} records; these are {n}: pass a larger out")
    return arena, out._memory
