"""AoS: records in one buffer (array of structures)."""

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from . import _backends as backends
from ._arena import Arena
from ._backends import check_threads
from ._errors import ConversionError, LayoutError
from ._faults import forward_error, guarded_reads
from ._layout import Layout
from ._plan import byte_range, claimed, null_bits

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

    array: Any  # numpy.ndarray of the records, or a device array
    layout: Layout

    def __init__(self, obj: Any, layout: "Layout | np.typing.DTypeLike | None" = None) -> None:
        if isinstance(obj, AoS):
            obj, layout = obj.array, obj.layout if layout is None else layout
        layout = None if layout is None else as_layout(layout)
        self._backend = backends.backend_of(obj)  # where the records live decides, once
        self.array, self.layout = self._backend.adopt_records(obj, layout)

    @property
    def device(self) -> str:
        """Where the records are: ``"cpu"`` or ``"cuda"``."""
        return self._backend.name

    def __reduce__(self) -> "tuple[Any, ...]":
        """Pickling: the records (NumPy pickles their bytes) and the layout; records on
        the GPU come back on the GPU (the unpickling process needs one). Records of a
        file mapped by ``read_records`` are copied with guarded reads first: a file that
        another program truncated is a ConversionError naming it, as in ``to_soa``."""
        if not self._backend.host:
            return _aos_on_device, (self.to_device("cpu").array, self.layout, self.device)
        if not isinstance(self.array, np.memmap):
            return AoS, (self.array, self.layout)
        return AoS, (self._copy("pickled", self.array.dtype), self.layout)

    def _copy(self, doing, dtype):
        """The records copied (cast to ``dtype``) into memory of their own, for pickling or
        ``np.array(aos)``. Records a file mapped by ``read_records`` are copied with
        guarded reads: if another program truncated the file, a ConversionError naming
        it and the first record gone, as ``to_soa`` gives, instead of SIGBUS."""
        src = self.array
        with guarded_reads(src, self.layout.itemsize, doing=doing):
            if np.dtype(dtype) == src.dtype and src.flags.c_contiguous:  # every byte, the padding's too
                return np.array(src.reshape(-1).view(np.uint8), copy=True, subok=False).view(src.dtype)
            # NumPy copies records field by field, leaving the copy's padding bytes as they
            # were in new memory (garbage): start from zeros, as to_aos() writes padding
            out = np.zeros(src.shape, dtype)
            np.copyto(out, src, casting="unsafe")
            return out

    def __len__(self) -> int:
        return self._backend.length(self.array, self.layout.itemsize)

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
        if not self._backend.host:
            raise LayoutError(f"AoS.{what}: the records are on the GPU; call .to_device('cpu') first (a copy)")

    def to_device(self, device: str) -> "AoS":
        """The records on ``device`` (``"cpu"`` or ``"cuda"``): ``self`` if they are
        there already, else a copy made in one transfer."""
        return self._moved(backends.get(device, self._backend))

    def _moved(self, target):
        """The records on the backend ``target``: through host memory, one copy each way
        that is not the host (one transfer between the host and a GPU)."""
        if target is self._backend:
            return self
        host = self._backend.records_to_host(self.array, self.layout)
        return AoS(target.records_from_host(host, self.layout), self.layout)

    def to_soa(
        self,
        *,
        nulls: "Mapping[str, Any] | None" = None,
        out: "SoA | None" = None,
        threads: "int | None" = None,
        device: "str | None" = None,
    ) -> "SoA":
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
        backend = backends.get(device, self._backend)
        threads = check_threads(threads)
        if backend is not self._backend:  # records elsewhere go there first, in one transfer
            return self._moved(backend).to_soa(nulls=nulls, out=out, threads=threads)
        from ._soa import soa_over_arena  # the one import upwards: see the layers contract

        n, layout = len(self), self.layout
        use, writes = None, []
        if out is None:
            arena = Arena(layout, n, frozenset(nulls))
            memory = backend.allocate(arena)
        else:
            arena, memory = _reusable(out, layout, n, frozenset(nulls), backend)
            if backend.overlaps(memory, self.array):
                raise LayoutError(
                    "out= is an SoA whose arena holds these very records; the columns would "
                    "overwrite the records while they are read: convert into a new SoA (no out=)"
                )
            use, writes = out._use, backend.claims(memory, f"out= (the {backend.arena_name} of the SoA passed)")
        # one conversion at a time per buffer; a file mapped by read_records may shrink meanwhile
        reads = backend.claims(self.array, "the records being converted")
        with claimed("AoS.to_soa", writes, reads), backend.guarded(self.array, layout.itemsize):
            if use is not None:
                use.reuse()  # from here on, SoAs made earlier over this memory refuse to read it
            try:
                fault = backend.aos_to_soa(self.array, layout, n, arena, memory, nulls, threads=threads)
                if fault is not None:
                    raise forward_error(layout, backend.records_to_host(self.array, layout), fault)
                return soa_over_arena(
                    layout, n, arena, memory, nulls, lambda: backend.records_to_host(self.array, layout), use, backend
                )
            except BaseException:
                if use is not None:
                    use.failed()  # the SoAs made earlier say so: this call returned none to use instead
                raise


def _aos_on_device(array, layout, device):
    """An unpickled AoS of GPU records: its host records moved back to ``device``."""
    return AoS(array, layout).to_device(device)


def _reusable(out, layout, n, nullable, backend):
    """The arena of ``out`` if it can take n records of layout with these nulls."""
    arena = getattr(out, "_arena", None)
    if arena is None or out._memory is None:
        raise LayoutError("out= must be an SoA made by AoS.to_soa (one that owns an arena)")
    if out._backend is not backend:
        raise LayoutError(f"out= is on {out.device}; these records convert on {backend.name}: pass an SoA made there")
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


def overlaps(a, b):
    """Whether the memory of ``a`` and ``b`` (arrays or Buffers) may share a byte."""
    (lo_a, hi_a), (lo_b, hi_b) = byte_range(a), byte_range(b)
    return lo_a < hi_b and lo_b < hi_a
