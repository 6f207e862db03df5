"""AoS: records in one buffer (array of structures)."""

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pyarrow as pa

from ._backends import check_device, check_threads, kernels_for
from ._errors import ConversionError, LayoutError
from ._faults import forward_error, guarded_reads
from ._layout import Layout
from ._plan import Arena, claimed, file_span, forward_ops, null_bits

if TYPE_CHECKING:
    from ._soa import SoA

__all__ = ["AoS", "as_layout", "checked_nulls"]


def checked_nulls(layout, nulls):
    """``nulls`` as a dict, after checking that it names leaf fields of ``layout`` and
    that each value is one of its field's type.

    Any value of the field's type is a sentinel, compared bit for bit: ``-0.0`` (then
    ``0.0`` is not null), ``-inf``, uint64 values above 2**63. Datetime and timedelta
    fields take only ``NaT``, their null already (another sentinel would merge two kinds
    of missing value, and NaT would not come back); a NaT given for one is dropped from
    the dict returned (the field's nulls are its NaTs anyway). A NaN sentinel
    makes every NaN null, whatever its payload or sign, and writing the records back
    puts the sentinel NaN in their place: NaN payloads are canonicalised.
    """
    nulls = dict(nulls or {})
    unknown = set(nulls) - set(layout.names)
    if unknown:
        raise LayoutError(f"nulls names {sorted(unknown)}, which are not leaf fields; leaves are {layout.names}")
    for name, value in list(nulls.items()):
        field = layout[name]
        if field.dtype.kind in "mM":
            if not _is_nat(value):
                raise ConversionError(
                    f"nulls[{name!r}]={value!r}: field {name!r} ({field.dtype.str} at offset {field.offset}) is a "
                    f"datetime, whose null is NaT already (nulls= takes only NaT for it); a second sentinel "
                    f"would make both null and NaT would come back as {value!r}: write NaT in those records "
                    f"instead (a[a[{name!r}] == v] = NaT)"
                )
            del nulls[name]  # NaT: null already, whatever unit the field converts from
            continue
        null_bits(field, value, "nulls")  # a ConversionError now, before any record is read
        if field.kind in ("bits", "enum"):
            what = "C bit-field" if field.kind == "bits" else "C enum (a dictionary column)"
            raise ConversionError(
                f"nulls[{name!r}]: field {name!r} ({field.dtype.str} at offset {field.offset}) is a {what}, and "
                f"sentinel nulls are not applied to those yet; convert without it and null the value in Arrow "
                f"(pyarrow.compute.if_else(pyarrow.compute.equal(column, value), None, column))"
                + ("" if field.kind == "bits" else ", or read the enum as integers (enum_as='int')")
            )
    return nulls


def _is_nat(value):
    try:
        return bool(np.isnat(np.asarray(value)))
    except TypeError:
        return False


def as_layout(layout: "Layout | np.typing.DTypeLike") -> Layout:
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
    array: Any  # numpy.ndarray of the records, or a device array
    layout: Layout

    def __init__(self, obj: Any, layout: "Layout | np.typing.DTypeLike | None" = None) -> None:
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

    def __reduce__(self) -> "tuple[Any, ...]":
        """Pickling: the records (NumPy pickles their bytes) and the layout; records on
        the GPU come back on the GPU (the unpickling process needs one). Records of a
        file mapped by ``read_records`` are copied with guarded reads first: a file that
        another program truncated is a ConversionError naming it, as in ``to_soa``."""
        if self.device != "cpu":
            return _aos_on_device, (self.to_device("cpu").array, self.layout, self.device)
        if not isinstance(self.array, np.memmap):
            return AoS, (self.array, self.layout)
        return AoS, (self._copy("pickled", self.array.dtype), self.layout)

    def _copy(self, doing, dtype):
        """The records copied (cast to ``dtype``) into memory of their own, for pickling or
        ``np.array(aos)``. Records a file mapped by ``read_records`` are copied with
        guarded reads: if another program truncated the file, a ConversionError naming
        it and the first record gone, as ``to_soa`` gives, instead of SIGBUS."""
        with guarded_reads(self.array, self.layout.itemsize, doing=doing):
            return np.array(self.array, dtype=dtype, copy=True, subok=False)

    def __len__(self) -> int:
        if self.device == "cuda":
            return self.array.shape[0] // self.layout.itemsize
        return self.array.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes of record data (length * itemsize)."""
        return len(self) * self.layout.itemsize

    def __repr__(self) -> str:
        return f"<AoS {len(self)} records x {self.layout.itemsize} bytes on {self.device}>"

    def __array__(self, dtype: Any = None, copy: "bool | None" = None) -> np.ndarray:
        self._on_host("__array__")
        if copy or (dtype is not None and np.dtype(dtype) != self.array.dtype):
            return self._copy("copied", np.dtype(dtype or self.array.dtype))
        return self.array

    def to_numpy(self) -> np.ndarray:
        """The records as a NumPy structured array (a view, no copy)."""
        self._on_host("to_numpy")
        return self.array

    def _on_host(self, what):
        if self.device != "cpu":
            raise LayoutError(f"AoS.{what}: the records are on the GPU; call .to_device('cpu') first (a copy)")

    def to_device(self, device: str) -> "AoS":
        """The records on ``device`` (``"cpu"`` or ``"cuda"``): ``self`` if they are
        there already, else a copy made in one transfer."""
        device = check_device(device, self.device)
        if device == self.device:
            return self
        from ._cuda import device as _device

        if device == "cuda":
            with guarded_reads(self.array, self.layout.itemsize):  # a file mapped by read_records may shrink
                raw = _device.to_device(np.ascontiguousarray(self.array))
            return AoS(raw[: self.nbytes], self.layout)
        host = _device.to_host(self.array, self.nbytes)
        return AoS(host.view(self.layout.dtype), self.layout)

    def to_soa(self, *, nulls: "Mapping[str, Any] | None" = None, out: "SoA | None" = None,
               threads: "int | None" = None, device: "str | None" = None) -> "SoA":
        """Transpose the records into Arrow columns, in one pass over them.

        Parameters
        ----------
        nulls : dict, optional
            Sentinel values per leaf name that mean "missing", e.g.
            ``{"qty": -1, "px": float("nan")}``: those values become nulls (an Arrow
            validity bitmap), in the same pass. datetime64 ``NaT`` is always null.
        out : SoA, optional
            An SoA made earlier by ``to_soa`` with the same layout and ``nulls`` keys and
            at least as many records: its arena is reused (no allocation), and the result
            shares it. Refused (LayoutError) while a pyarrow object exported from that
            arena (``to_arrow()``, ``to_record_batch()``, the PyCapsule interface, a
            column's ``to_arrow()``) is still alive, since its buffers would change under
            it; NumPy views of columns (``np.asarray(soa["px"])``) are not tracked and
            show the new values. ``out`` itself (and every SoA made earlier over the
            arena) then refuses to be read: use the result. One conversion owns the
            arena at a time: another thread's conversion writing or reading that memory
            meanwhile is refused (LayoutError), never mixed with this one.
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
        threads = check_threads(threads)
        if device == "cuda":
            from ._cuda import transpose as _gpu

            return _gpu.forward(self.to_device("cuda"), nulls, out)
        if self.device != "cpu":
            return self.to_device("cpu").to_soa(nulls=nulls, out=out, threads=threads)
        backend = kernels_for(device)
        n = len(self)
        use, writes = None, []
        if out is None:
            arena = Arena(self.layout, n, frozenset(nulls))
            memory = arena.allocate()
        else:
            arena, memory = _reusable(out, self.layout, n, frozenset(nulls))
            if overlaps(memory, self.array):
                raise LayoutError("out= is an SoA whose arena holds these very records; the columns would "
                                  "overwrite the records while they are read: convert into a new SoA (no out=)")
            use, writes = out._use, [("cpu", *byte_range(memory), "out= (the arena of the SoA passed)")]
        # one conversion at a time per buffer; a file mapped by read_records may shrink meanwhile
        reads = [("cpu", *byte_range(self.array), "the records being converted")]
        reads += file_span(self.array, "the records being converted")
        with claimed("AoS.to_soa", writes, reads), \
                guarded_reads(self.array, self.layout.itemsize):
            if use is not None:
                use.reuse()  # from here on, SoAs made earlier over this memory refuse to read it
            try:
                ops, offs, keep = forward_ops(arena, memory.ctypes.data, nulls)
                src = self.array.ctypes.data  # not __array_interface__, which describes every field
                fault = backend.aos_to_soa(src, self.array.strides[0] if n else 1, n, ops, offs, threads=threads,
                                           owners=(self.array, memory, ops, offs, keep))
                del keep
                if fault is not None:
                    raise forward_error(self.layout, self.array, fault)
                return soa_over_arena(self.layout, n, arena, memory, nulls, self.array, use)
            except BaseException:
                if use is not None:
                    use.failed()  # the SoAs made earlier say so: this call returned none to use instead
                raise


def _aos_on_device(array, layout, device):
    """An unpickled AoS of GPU records: its host records moved back to ``device``."""
    return AoS(array, layout).to_device(device)


def soa_over_arena(layout, n, arena, memory, nulls, records, use=None):
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
    return SoA._from_arena(layout, n, arena, memory, nulls, dictionaries, use)


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



def byte_range(obj):
    """``(first, end)`` addresses of the memory of a NumPy array or a pyarrow Buffer."""
    if isinstance(obj, pa.Buffer):
        return obj.address, obj.address + obj.size
    return getattr(np.lib, "array_utils", np).byte_bounds(np.asarray(obj))  # (NumPy 1.26: np.byte_bounds)


def overlaps(a, b):
    """Whether the memory of ``a`` and ``b`` (arrays or Buffers) may share a byte."""
    (lo_a, hi_a), (lo_b, hi_b) = byte_range(a), byte_range(b)
    return lo_a < hi_b and lo_b < hi_a
