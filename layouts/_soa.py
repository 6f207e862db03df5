"""SoA: the records as Arrow columns (structure of arrays), and its column objects."""

from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
import pyarrow as pa

from . import _arrays as arrays
from . import _backends as backends
from ._aos import AoS, as_layout, overlaps
from ._arena import Arena, ArenaUse
from ._backends import Backend, check_threads
from ._errors import ConversionError, LayoutError, Problems
from ._faults import reverse_error
from ._layout import Layout
from ._plan import ALIGN, ColumnBuffers, claimed, native_dtype, without_views

__all__ = ["SoA", "Column", "SoAParts", "soa_over_arena"]


def aliases_error(layout):
    """The LayoutError of writing records of a layout whose fields share bytes (every
    member of a union, every REDEFINES alternative): which to keep, and the columns of
    the others to drop, in one message."""
    a, b = layout.aliases[0]
    others = sorted({y for x, y in layout.aliases if x == a})
    return LayoutError(
        f"fields {a!r} and {b!r} share bytes of the record (union members), so writing "
        f"records back would write those bytes twice; keep one member per union, e.g. "
        f"Layout.from_c(..., unions={{{a.rpartition('.')[0] or a!r}: {a.rpartition('.')[2]!r}}}), "
        f"and drop the other members' columns, extra={others!r}"
    )


class SoAParts(NamedTuple):
    """What an SoA is made of (:meth:`SoA.parts`), for the converter and the GPU slots:
    read them, never change them."""

    layout: Layout
    length: int
    columns: "tuple[ColumnBuffers, ...]"
    fills: "dict[str, Any]"
    truncate: bool
    arena: "Arena | None"
    memory: Any
    backend: Backend


class SoA:
    """Records as Arrow columns: one buffer per leaf field (plus validity and offsets).

    Made by :meth:`AoS.to_soa` (the columns live in one arena, each buffer at a
    64-byte-aligned offset: relocatable, no pointers inside) or by :meth:`from_arrow`
    (the columns borrow the Arrow buffers). Exports are zero-copy: :meth:`to_arrow`,
    the Arrow PyCapsule interface, and ``soa["name"]`` columns.

    Examples
    --------
    >>> import numpy as np, layouts as lo
    >>> a = np.array([(1, 2.5), (2, 3.5)], dtype=[("qty", "<i4"), ("px", "<f8")])
    >>> soa = lo.AoS(a).to_soa()
    >>> np.asarray(soa["px"]).tolist()
    [2.5, 3.5]
    >>> bool((soa.to_aos().to_numpy() == a).all())
    True
    """

    def __init__(
        self,
        layout: Layout,
        length: int,
        columns: "Iterable[ColumnBuffers]",
        *,
        fills: "Mapping[str, Any] | None" = None,
        truncate: bool = False,
        arena: "Arena | None" = None,
        memory: Any = None,
        backend: "Backend | None" = None,
    ) -> None:
        self.layout, self._length, self._columns = layout, length, tuple(columns)
        self._backend = backends.host() if backend is None else backend
        self._fills, self._truncate = dict(fills or {}), truncate
        self._arena, self._memory = arena, memory
        self._use, self._generation = ArenaUse(), 0

    @property
    def device(self) -> str:
        """Where the columns are: ``"cpu"`` or ``"cuda"``."""
        return self._backend.name

    def parts(self) -> SoAParts:
        """The layout, length, column buffers, fill values, ``truncate``, arena, memory
        and backend of this SoA (internal: for the converter and the GPU slots)."""
        return SoAParts(
            self.layout,
            self._length,
            self._columns,
            self._fills,
            self._truncate,
            self._arena,
            self._memory,
            self._backend,
        )

    def _current(self, what):
        """Refuse to read an arena a later ``to_soa(out=...)`` has written over."""
        if self._generation != self._use.generation and self._use.failed_generation == self._use.generation:
            raise LayoutError(
                f"SoA.{what}: this SoA's arena was reused by a later to_soa(out=...) that failed (it raised, and "
                f"returned no SoA), so its buffers now hold part of that call's records, not this SoA's: convert "
                f"the records again, into a new arena (out=None) or into this one (out= this SoA), and use the "
                f"SoA that returns"
            )
        if self._generation != self._use.generation:
            raise LayoutError(
                f"SoA.{what}: this SoA's arena was reused by a later to_soa(out=...), so its buffers now hold "
                f"other records; use the SoA that call returned"
            )

    def _export(self):
        """A token for one export of this SoA's arena (None for columns borrowed from
        Arrow): the exported buffers hold it and :class:`ArenaUse` tracks it, so that
        ``to_soa(out=...)`` can refuse to write over memory an export still shows."""
        if self._memory is None:
            return None
        token = _Export(self._memory)
        self._use.export(self._generation, token, lambda: self._current("to_arrow"))
        return token

    def _reads(self):
        """The byte ranges a conversion reading these columns reads, for :func:`claimed`:
        the arena, or each borrowed Arrow buffer (host memory)."""
        if self._memory is not None:
            return self._backend.claims(self._memory, "the columns being converted (this SoA's arena)")
        space = self._backend.name
        return [
            (space, b.address, b.address + b.size, f"column {f.name!r} being converted")
            for f, c in zip(self.layout.fields, self._columns)
            for b in (c.validity, c.offsets, c.data)
            if b is not None
        ]

    def _exported(self, column, token):
        """``column`` (ColumnBuffers) as a pyarrow array whose buffers hold ``token``."""
        if token is None:
            return column.to_array()

        return column.to_array(lambda b: pa.foreign_buffer(b.address, b.size, base=token))

    @classmethod
    def from_arrow(
        cls,
        obj: Any,
        layout: "Layout | np.typing.DTypeLike",
        *,
        fill: "Mapping[str, Any] | None" = None,
        truncate: bool = False,
        cast: str = "strict",
        time_unit: "str | Mapping[str, str] | None" = None,
        extra: "str | Sequence[str]" = "error",
    ) -> "SoA":
        """Columns from Arrow data, bound for a record layout (checked, not yet written).

        Parameters
        ----------
        obj : pyarrow.Table, pyarrow.RecordBatch, or an Arrow PyCapsule producer
            Anything with ``__arrow_c_stream__`` or ``__arrow_c_array__`` (polars,
            pandas, DuckDB results...). Columns are found by name.
        layout : Layout or numpy.dtype
        fill : dict, optional
            Leaf name -> value written where that column is null. A null with no fill
            value is an error (datetime64 fields take NaT). Any value of the field's
            type works (``-0.0``, ``-inf``, uint64 above 2**63, NaT...) and is written
            bit for bit. A NaN sentinel from ``to_soa(nulls=...)`` made every NaN
            null whatever its payload or sign, so those all come back as the sentinel
            NaN: NaN payloads are canonicalised.
        truncate : bool
            Cut strings longer than their ``S<n>``/``U<n>`` field instead of failing.
        cast : {"strict", "parse"}
            ``"strict"`` (default): a column is cast only within its kind of value
            (numbers among themselves, times between units, text between string and
            binary); a column of another kind (strings for a number field, booleans for
            an integer field, numbers for a text or datetime field...) is a
            ConversionError naming the column, its Arrow type and the field's type.
            ``"parse"``: such columns are cast too (text parsed as numbers, booleans as
            0/1...), still only when every value comes back unchanged.
        time_unit : {"s", "ms", "us", "ns", "name"} or dict, optional
            The unit of the counts in integer fields that take time columns (a
            timestamp, duration, date or time of day becomes that many units), and of
            integer columns bound for datetime fields: one unit for every such field,
            ``{field: unit}``, or ``"name"`` to read it from the end of the field's
            name (``ts_ns``: ns, ``t_us``, ``t_ms``, ``t_s``). Without one, a time
            column for an integer field is a ConversionError (also with
            ``cast="parse"``): a count's unit is never guessed.
        extra : {"error", "drop"} or list of str
            Columns (and struct children) the layout does not have: an error naming
            them (default), dropped (``"drop"``), or only these ones dropped.

        Every column that does not fit is reported in one ConversionError, each with
        its fix; its ``problems`` holds ``(column, error)`` pairs and its ``fixes`` the
        keyword arguments that fix them all (``{"fill": {"qty": "value"}, ...}``).

        Columns whose Arrow type equals the field's are used without a copy. Other
        types are cast only when no value changes; else ConversionError. What the
        kernels will read is checked first (buffer sizes, string offsets, dictionary
        indices), so damaged Arrow data is a ConversionError, never a crash.

        Examples
        --------
        >>> import numpy as np, pyarrow as pa, layouts as lo
        >>> t = pa.table({"qty": pa.array(["7", "8"])})
        >>> lo.SoA.from_arrow(t, [("qty", "<i4")], cast="parse").to_aos().to_numpy()["qty"].tolist()
        [7, 8]
        """
        from ._arrow_in import as_table, check_cast, columns_from_arrow

        check_cast(cast)
        layout = as_layout(layout)
        table = as_table(obj)
        _unique_names(layout._arrow_fields(), list(table.schema))
        try:
            length, columns, fills = columns_from_arrow(
                table, layout, dict(fill or {}), cast, time_unit, extra, truncate=truncate
            )
        except ConversionError as err:
            prepared = err.__dict__.pop("prepared", None)
            if prepared is None:
                raise
            n, checked, filled = prepared
            raise _with_value_problems(layout, err, n, checked, filled, truncate) from None
        return cls(layout, length, columns, fills=fills, truncate=truncate)

    def __reduce__(self) -> "tuple[Any, ...]":
        """Pickling (Dask ships SoAs between workers): the layout, the fill values and
        the column buffers' bytes; an SoA over an arena pickles the arena (copied while
        no conversion writes it) and comes back over an arena of its own, which a later
        ``to_soa(out=...)`` can reuse. GPU columns come back on the GPU (the unpickling
        process needs one). An SoA whose arena a later ``to_soa(out=...)`` reused holds
        other records: pickling it is refused, as reading it is."""
        if not self._backend.host:
            return _soa_on_device, (self.to_device("cpu"), self.device)
        if self._memory is None:  # borrowed Arrow buffers: only the bytes of these rows (a slice's own)
            return _soa_of_buffers, (
                self.layout,
                self._length,
                [_own_bytes(c) for c in self._columns],
                self._fills,
                self._truncate,
            )
        columns = [
            (c.type, c.length, c.validity, c.offsets, c.data, c.offset, c.kind, c.dictionary) for c in self._columns
        ]
        with claimed("pickling an SoA", (), self._reads()):
            self._current("__reduce__ (pickle)")
            memory = self._memory.copy()
        base = self._memory.ctypes.data

        def at(b):
            return None if b is None else (b.address - base, b.size)

        columns = [(*c[:2], at(c[2]), at(c[3]), at(c[4]), *c[5:]) for c in columns]
        return _soa_of_arena, (self.layout, self._length, columns, self._fills, self._truncate, self._arena, memory)

    # --------------------------------------------------------------- properties
    def __len__(self) -> int:
        return self._length

    @property
    def arena(self) -> Any:
        """The uint8 array holding every column buffer, or None (columns from Arrow)."""
        return self._memory

    @property
    def nbytes(self) -> int:
        """Bytes of the arena (or of the borrowed buffers)."""
        if self._memory is not None:
            return self._memory.shape[0]
        return sum(b.size for c in self._columns for b in (c.validity, c.offsets, c.data) if b is not None)

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of these columns."""
        return self.layout._schema(self.layout._arrow_fields([c.type for c in self._columns]))

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __repr__(self) -> str:
        return f"<SoA {len(self)} records, {len(self._columns)} leaf columns on {self.device}>"

    # ------------------------------------------------------------------ exports
    def to_record_batch(self) -> pa.RecordBatch:
        """A pyarrow.RecordBatch over the same buffers (no copy)."""
        self._on_host("to_arrow")
        schema = self.schema
        token = self._export()
        leaves = iter(self._exported(c, token) for c in self._columns)
        arrays = [_assemble(f.type, self._length, leaves) for f in schema]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def to_arrow(self) -> pa.Table:
        """A pyarrow.Table whose buffers point into this SoA's memory (no copy).

        The table keeps the memory alive. Booleans are bit-packed as Arrow wants;
        sentinel values stay in the buffers under a null.
        """
        return pa.Table.from_batches([self.to_record_batch()])

    def to_pandas(self, *, dtype_backend: str = "pyarrow", types_mapper: Any = None, **options: Any) -> Any:
        """The columns as a pandas DataFrame.

        Parameters
        ----------
        dtype_backend : {"pyarrow", "numpy", "numpy_nullable"}
            ``"pyarrow"`` (default): every column is a ``pandas.ArrowDtype`` over this
            SoA's Arrow data (no copy): nulls, fixed-size lists, structs and enum
            dictionaries stay as they are. ``"numpy"``: NumPy dtypes, as
            ``pyarrow.Table.to_pandas`` makes them (a copy; integer columns with nulls
            become float64 with NaN). ``"numpy_nullable"``:
            pandas' nullable ``Int32``/``Float64``/``boolean``/``string`` dtypes where
            they apply (a copy), NumPy dtypes elsewhere.
        types_mapper : callable, optional
            Arrow type -> pandas dtype, as in ``pyarrow.Table.to_pandas``; replaces the
            mapping ``dtype_backend`` chooses.
        **options
            Further ``pyarrow.Table.to_pandas`` options (``split_blocks``,
            ``timestamp_as_object``...).

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> import numpy as np, layouts as lo
        >>> records = np.array([(1, 2.5), (-1, 3.0)], dtype=[("qty", "<i4"), ("px", ">f8")])
        >>> soa = lo.AoS(records).to_soa(nulls={"qty": -1})
        >>> df = soa.to_pandas()
        >>> df
            qty   px
        0     1  2.5
        1  <NA>  3.0
        >>> str(df["qty"].dtype), str(soa.to_pandas(dtype_backend="numpy")["qty"].dtype)
        ('int32[pyarrow]', 'float64')
        """
        try:
            import pandas as pd
        except ImportError as err:
            raise ImportError("SoA.to_pandas needs pandas: pip install pandas") from err
        if dtype_backend not in ("pyarrow", "numpy", "numpy_nullable"):
            raise LayoutError(f"dtype_backend must be 'pyarrow', 'numpy' or 'numpy_nullable', got {dtype_backend!r}")
        self._on_host("to_pandas")
        mapper_given = types_mapper is not None
        if types_mapper is None and dtype_backend == "pyarrow":
            types_mapper = pd.ArrowDtype
        elif types_mapper is None and dtype_backend == "numpy_nullable":
            types_mapper = _nullable_dtypes(pd).get
        table = self.to_arrow()
        try:
            return table.to_pandas(types_mapper=types_mapper, **options)
        except (ValueError, OverflowError) as err:  # a value pandas' NumPy types (or Python's) cannot hold
            raise _pandas_error(table, dtype_backend, types_mapper, mapper_given, options, err) from err

    def to_polars(self, *, rechunk: bool = False) -> Any:
        """The columns as a polars DataFrame (``polars.from_arrow``).

        Polars takes the Arrow buffers without a copy where its types match Arrow's
        (numbers, booleans, timestamps, fixed-size lists as ``Array``); it converts the
        others (fixed-size binary to ``Binary``, enum dictionaries to ``Categorical``).

        Parameters
        ----------
        rechunk : bool
            Passed to ``polars.from_arrow``: make each column one contiguous chunk.

        Returns
        -------
        polars.DataFrame

        Examples
        --------
        >>> import numpy as np, layouts as lo
        >>> records = np.array([(1, 2.5), (-1, 3.0)], dtype=[("qty", "<i4"), ("px", ">f8")])
        >>> df = lo.AoS(records).to_soa(nulls={"qty": -1}).to_polars()
        >>> df["qty"].to_list(), df.schema["px"]
        ([1, None], Float64)
        """
        try:
            import polars as pl
        except ImportError as err:
            raise ImportError("SoA.to_polars needs polars: pip install polars") from err
        self._on_host("to_polars")
        return pl.from_arrow(self.to_arrow(), rechunk=rechunk)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def __arrow_c_array__(self, requested_schema: Any = None) -> "tuple[Any, Any]":
        return self.to_record_batch().__arrow_c_array__(requested_schema)

    def _on_host(self, what):
        if not self._backend.host:
            raise LayoutError(
                f"SoA.{what}: the columns are on the GPU; use .to_device('cpu') first (one copy), or keep "
                f"them there with .to_cudf(), a column's __cuda_array_interface__/__dlpack__, or "
                f"__arrow_c_device_array__()"
            )

    def __arrow_c_device_array__(self, requested_schema: Any = None, **kwargs: Any) -> "tuple[Any, Any]":
        """The Arrow C Device Data Interface: ``(schema capsule, device array capsule)``
        over this SoA's buffers, no copy; device type CUDA for GPU columns, CPU
        otherwise. The buffers stay alive until the consumer releases the array."""
        from ._cuda.c_device import export_device_array

        if requested_schema is not None:
            raise NotImplementedError("__arrow_c_device_array__ exports the columns' own schema only")
        return export_device_array(self.schema, self._length, self._columns, self._memory, self._backend, self)

    def to_device(self, device: str) -> "SoA":
        """The columns on ``device`` (``"cpu"`` or ``"cuda"``): ``self`` if they are
        there, else a copy made in one transfer (to the GPU: into one device arena)."""
        return self._moved(backends.get(device, self._backend))

    def _moved(self, target):
        """The columns on the backend ``target``, through host memory: one transfer
        between the host and a GPU (the arena as it is, or borrowed columns packed)."""
        if target is self._backend:
            return self
        with claimed(f"SoA.to_device({target.name!r})", (), self._reads()):
            self._current("to_device")
            memory, columns = self._backend.columns_to_host(self._memory, without_views(self._columns))
            if self._arena is None:
                memory = None  # borrowed (or packed) columns: their buffers hold the bytes, no arena
            memory, columns = target.columns_from_host(memory, columns)
        return SoA(
            self.layout,
            self._length,
            columns,
            fills=self._fills,
            truncate=self._truncate,
            arena=self._arena,
            memory=memory,
            backend=target,
        )

    def to_cudf(self) -> Any:
        """A ``cudf.DataFrame`` over the same device memory (no copy; see :mod:`layouts._cuda.cudf`)."""
        from ._cuda.cudf import to_cudf

        soa = self.to_device("cuda")
        return to_cudf(soa.layout, soa._memory, soa._columns, soa)

    @classmethod
    def from_cudf(
        cls,
        df: Any,
        layout: "Layout | np.typing.DTypeLike",
        *,
        fill: "Mapping[str, Any] | None" = None,
        truncate: bool = False,
    ) -> "SoA":
        """Columns of a ``cudf.DataFrame``, bound for a record layout, on the GPU.

        Checked by :meth:`from_arrow`'s rules. Each column's device buffers are copied
        device to device into the SoA's arena; columns cuDF cannot hand over as the
        layout's type are converted through host Arrow one by one (see
        :func:`layouts._cuda.cudf.from_cudf`), and a column of another kind of value is
        a ConversionError naming it.
        """
        from ._cuda.cudf import from_cudf

        return from_cudf(cls, df, as_layout(layout), dict(fill or {}), truncate, backends.get("cuda"))

    def __getitem__(self, name: str) -> "Column":
        i = self.layout._positions.get(name)
        if i is None:
            raise _NoColumn(_no_column(self.layout.names, name))
        return Column(self, i)

    @property
    def columns(self) -> "list[str]":
        """Names of the leaf columns (``soa[name]`` gives one)."""
        return self.layout.names

    # ------------------------------------------------------------------ back
    def to_aos(
        self, *, out: "AoS | np.ndarray | None" = None, threads: "int | None" = None, device: "str | None" = None
    ) -> AoS:
        """Write the columns back as records, in one pass; returns an :class:`AoS`.

        Padding bytes (holes no field covers) come out as zeros. Nulls are written as
        the sentinel or fill value they came with (NaT for datetimes); a null with no
        such value raises ConversionError, and nothing is returned.

        Parameters
        ----------
        out : numpy.ndarray or AoS, optional
            A writable C-contiguous array of ``layout.dtype`` (or of bytes) with room
            for the records; filled in place. While this call writes it, another
            thread's conversion writing or reading that memory (any view of it, or,
            for a ``numpy.memmap``, any other map of those bytes of its file) is
            refused with a LayoutError. A conversion that fails (ConversionError) is
            not undone in ``out``: records of at most 4096 bytes are written a block
            (16 KiB of records, at least 64) at a time once all its values converted,
            so each record of ``out`` is either as it was or whole (as a successful
            call writes it), the failing record's block not written, which other
            blocks were written unspecified (with threads, blocks after it too);
            larger records are written in place, so the failing record's block of 64
            may hold half-written records. Treat ``out`` as undefined after an error
            (convert with ``out=None`` to keep a buffer's old contents).
        """
        backend = backends.get(device, self._backend)
        threads = check_threads(threads)
        n = self._length
        if self.layout.aliases:
            raise aliases_error(self.layout)
        if out is not None and not backend.host:
            raise LayoutError("out= is for records on the CPU; on the GPU to_aos allocates from the pool")
        if backend is not self._backend:  # columns elsewhere go there first, in one transfer
            return self._moved(backend).to_aos(out=out, threads=threads)
        self._current("to_aos")
        if out is None:
            (target, records), writes = backend.new_records(self.layout, n), []
        else:
            records = target = _writable_records(out, self.layout, n, self._columns)
            writes = backend.claims(records, "out= (the records array passed)")
        with claimed("SoA.to_aos", writes, self._reads()):
            self._current("to_aos")  # not reused between the check above and the claim
            fault = backend.soa_to_aos(
                target, self.layout, n, self._columns, self._memory, self._fills, self._truncate, threads=threads
            )
            if fault is not None:
                columns = backend.columns_to_host(self._memory, self._columns)[1]
                raise every_reverse_error(self.layout, columns, self._fills, self._truncate, n, fault)
        return AoS(records, self.layout)


RERUNS = 16  # the most columns an error of the way back looks for a problem in, after the first
CHECK_BYTES = 64 << 20  # the records those runs write at a time (scratch memory, reused)


def every_reverse_error(layout, columns, fills, truncate, n, fault):
    """The ConversionError of ``fault``, a value that one of the (host) ``columns`` could not
    write into its field (:func:`layouts._faults.reverse_error`), with a value of each other
    column that cannot be written either: the CPU kernel runs again with the columns found
    so far left out (:func:`_first_fault`), so that one error names every column to fix (each
    column's ``problems`` entry; ``fixes``: the options that fix them). Up to :data:`RERUNS`
    more runs, each stopping at the block of rows where it finds one: an error path."""
    return _value_problems(layout, columns, fills, truncate, n, fault, Problems(), [])


def value_problems(soa, named=()):
    """``(column, ConversionError)`` of each column of ``soa`` not in ``named`` that holds a
    value its field cannot take (the first the search finds in each), found as
    :func:`every_reverse_error` finds them; rows counted from the SoA's first."""
    layout, n = soa.layout, len(soa)
    columns = soa._backend.columns_to_host(soa._memory, soa._columns)[1]
    skip = [i for i, f in enumerate(layout.fields) if f.name in named]
    if n == 0 or len(skip) == len(layout.fields):
        return []
    fault = _first_fault(layout, columns, soa._fills, soa._truncate, n, skip)
    if fault is None:
        return []
    return list(_value_problems(layout, columns, soa._fills, soa._truncate, n, fault, Problems(), skip).problems)


def _with_value_problems(layout, err, n, columns, fills, truncate):
    """``err``, the problems of some Arrow columns (``SoA.from_arrow``'s checks), with those
    of the values of the other ``columns`` (None: a column with a problem), found as
    :func:`every_reverse_error` finds them, so that the first error names the values that
    would fail next too."""
    skip = [i for i, c in enumerate(columns) if c is None]
    if len(skip) == len(layout.fields) or n == 0:
        return err
    try:
        fault = _first_fault(layout, columns, fills, bool(truncate), n, skip)
    except (ConversionError, LayoutError):  # (a fill value its field cannot hold: said when the rest is fixed)
        return err
    if fault is None:
        return err
    found = Problems()
    found.items = list(err.problems)
    return _value_problems(layout, columns, fills, bool(truncate), n, fault, found, skip)


def _value_problems(layout, columns, fills, truncate, n, fault, found, skip):
    """``found`` with the problem of ``fault`` and of every column the kernel finds one in
    when it runs again without the columns in ``skip`` and those found: one error."""
    runs = 0
    while fault is not None:
        skip.append(fault[1])
        found.add(layout.fields[fault[1]].name, reverse_error(layout, columns, fault))
        if len(skip) == len(layout.fields):
            break
        if runs == RERUNS:
            found.partial = True
            break
        runs += 1
        fault = _first_fault(layout, columns, fills, truncate, n, skip)
    return found.error()


def _first_fault(layout, columns, fills, truncate, n, skip):
    """The first ``(row, field, code)`` that the CPU kernel finds writing the (host)
    ``columns`` but those of the fields in ``skip`` (None there) as records, a block of
    rows at a time into scratch memory of at most :data:`CHECK_BYTES`; None if none."""
    cpu, block = backends.host(), max(1, CHECK_BYTES // max(layout.itemsize, 1))
    scratch = np.empty(min(n, block) * layout.itemsize, np.uint8)
    columns = without_views(columns)  # (binary_view columns as plain ones: a row range of those is cut below)
    for first in range(0, n, block):
        rows = min(block, n - first)
        part = [
            None
            if c is None
            else ColumnBuffers(
                c.type, rows * f.count, c.validity, c.offsets, c.data, c.offset + first * f.count, c.kind, c.dictionary
            )
            for c, f in zip(columns, layout.fields)
        ]
        fault = cpu.soa_to_aos(scratch, layout, rows, part, None, fills, truncate, skip=tuple(skip))
        if fault is not None:
            return (first + fault[0], fault[1], fault[2])
    return None


def soa_over_arena(layout, n, arena, memory, nulls, records, use=None, backend=None):
    """The SoA over the first n records of an arena the forward kernels just wrote
    (``memory``, on ``backend``, the CPU by default), with each enum column's dictionary
    made from its indices (which may change, see :func:`_enum_dictionary`); ``records()``
    gives the records converted, on the host. ``use`` is the :class:`ArenaUse` of SoAs
    made earlier over the same memory (``to_soa(out=...)``), which this one succeeds."""
    backend = backends.host() if backend is None else backend
    dictionaries = {}
    for i, f in enumerate(layout.fields):
        if f.kind == "enum":
            start, size = arena.buffers[i]["data"]
            idx = backend.read(memory, start, size).view(np.int32)[: n * f.count]
            dictionaries[i], changed = _enum_dictionary(f, idx, records)
            if changed:
                backend.write(memory, start, idx)
    columns = backend.arena_columns(arena, memory, n, dictionaries)
    soa = SoA(layout, n, columns, fills=nulls, arena=arena, memory=memory, backend=backend)
    if use is not None:
        soa._use, soa._generation = use, use.generation
    return soa


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
    return arrays.strings(names), len(bad) > 0  # (not pa.array: see _arrays)


def _unique_names(wanted: "list[pa.Field]", have: "list[pa.Field]", parent: "str | None" = None) -> None:
    """Raise LayoutError where the Arrow fields ``have`` hold two or more of a name the
    layout reads (``wanted``: its Arrow fields), at the top or among a struct's children
    (``parent`` names the column), since a name would not say which to read."""
    names = [f.name for f in have]
    where: "dict[str, list[int]]" = {}
    for i, n in enumerate(names):
        where.setdefault(n, []).append(i)
    for want in wanted:
        at = where.get(want.name, [])
        count = len(at)
        if count == 1:
            got, typ = have[at[0]].type, want.type
            while pa.types.is_fixed_size_list(typ) and (
                pa.types.is_list(got) or pa.types.is_large_list(got) or pa.types.is_fixed_size_list(got)
            ):
                got, typ = got.value_type, typ.value_type
            if pa.types.is_struct(typ) and pa.types.is_struct(got):
                path = want.name if parent is None else f"{parent}.{want.name}"
                _unique_names(list(typ), list(got), path)
        elif count > 1:
            if parent is None:
                seen: "dict[str, int]" = {}
                renamed = []
                for n in names:
                    seen[n] = seen.get(n, 0) + 1
                    renamed.append(n if seen[n] == 1 or n != want.name else f"{n}_{seen[n]}")
                raise LayoutError(
                    f"the Arrow data has {count} columns named {want.name!r} (columns {at} of {names}); the "
                    f"layout's field {want.name!r} is found by name, which would not say which one to read: "
                    f"rename all but one first, e.g. table.rename_columns({renamed!r}) (pandas: df.columns = "
                    f"[...]), or drop the ones not meant"
                )
            raise LayoutError(
                f"column {parent!r} has {count} struct children named {want.name!r} (children {at} of {names}); "
                f"the layout's field {parent + '.' + want.name!r} is found by name, which would not say which "
                f"one to read: rename all but one first (pyarrow.compute.struct_field and "
                f"pyarrow.StructArray.from_arrays with new names)"
            )


def _own_bytes(c):
    """A borrowed column as ``ColumnBuffers`` arguments holding NumPy arrays of only the
    bytes its rows use (:meth:`ColumnBuffers.used`; string offsets rebased to them). A
    binary_view column (views into a source that does not travel) comes back as binary."""
    c = without_views((c,))[0]
    if c.length == 0:
        large = pa.types.is_large_binary(c.type) or pa.types.is_large_string(c.type)
        ends = None if c.offsets is None else np.zeros(1, "<i8" if large else "<i4")
        return (c.type, 0, None, ends, None if c.data is None else np.zeros(0, np.uint8), 0, c.kind, c.dictionary)
    first, validity, ends, data = c.used()
    if ends is not None and ends[0]:
        ends = ends - ends[0]
    return (c.type, c.length, validity, ends, data, c.offset - first, c.kind, c.dictionary)


def _soa_of_buffers(layout, length, columns, fills, truncate):
    """An unpickled SoA of borrowed Arrow buffers (see :meth:`SoA.__reduce__`)."""

    def buf(b):
        return b if b is None or isinstance(b, pa.Buffer) else pa.py_buffer(np.ascontiguousarray(b))

    return SoA(
        layout,
        length,
        [ColumnBuffers(t, n, buf(v), buf(o), buf(d), *rest) for t, n, v, o, d, *rest in columns],
        fills=fills,
        truncate=truncate,
    )


def _soa_of_arena(layout, length, columns, fills, truncate, arena, memory):
    """An unpickled SoA over an arena: ``memory`` copied to a new 64-byte-aligned
    allocation, the columns at their offsets in it (see :meth:`SoA.__reduce__`)."""
    raw = np.empty(memory.shape[0] + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    own = raw[skip : skip + memory.shape[0]]
    own[:] = memory

    def buf(spec):
        return None if spec is None else pa.py_buffer(own[spec[0] : spec[0] + spec[1]])

    bound = [ColumnBuffers(t, n, buf(v), buf(o), buf(d), *rest) for t, n, v, o, d, *rest in columns]
    return SoA(layout, length, bound, fills=fills, truncate=truncate, arena=arena, memory=own)


def _soa_on_device(host, device):
    """An unpickled GPU SoA: its host copy moved back to ``device``."""
    return host.to_device(device)


class _Export:
    """Held by the buffers of one export of an arena (see :meth:`SoA._exported`): alive
    while anything made from that export is, and keeps the arena's memory alive."""

    __slots__ = ("memory", "__weakref__")

    def __init__(self, memory):
        self.memory = memory


def _assemble(arrow_type, length, leaves):
    """Wrap leaf arrays (in depth-first order) into the fixed_size_list/struct tree."""
    if pa.types.is_fixed_size_list(arrow_type):
        child = _assemble(arrow_type.value_type, length * arrow_type.list_size, leaves)
        return pa.Array.from_buffers(arrow_type, length, [None], children=[child])
    if pa.types.is_struct(arrow_type):
        children = [_assemble(arrow_type.field(i).type, length, leaves) for i in range(arrow_type.num_fields)]
        return pa.Array.from_buffers(arrow_type, length, [None], children=children)
    return next(leaves)


def _pandas_error(table, dtype_backend, types_mapper, mapper_given, options, err):
    """The ConversionError for ``to_pandas`` failing on a value: the column, the value
    (as Arrow's raw count for a time, which Python may not hold) and the fix."""
    for name in table.column_names:
        column = table.column(name)
        try:
            table.select([name]).to_pandas(types_mapper=types_mapper, **options)
        except (ValueError, OverflowError):
            break
    else:
        return ConversionError(
            f"SoA.to_pandas(dtype_backend={dtype_backend!r}): {err}; use the default "
            f"dtype_backend='pyarrow' (pandas.ArrowDtype columns hold every Arrow value)"
        )
    value = ""
    t = column.type
    if pa.types.is_temporal(t) and column.length() > 0:
        import pyarrow.compute as pc

        raw = column.combine_chunks().view(pa.int64() if t.bit_width == 64 else pa.int32())
        unit = "days" if pa.types.is_date32(t) else getattr(t, "unit", "")
        for count in pc.min_max(raw).values():
            try:
                pa.array([count.as_py()], raw.type).view(t).to_pandas(types_mapper=types_mapper, **options)
            except (ValueError, OverflowError):
                value = f" the value {count.as_py()} ({unit} since 1970-01-01),"
                break
    types, fix = ("those types", " with no types_mapper") if mapper_given else ("that backend's types", "")
    return ConversionError(
        f"SoA.to_pandas(dtype_backend={dtype_backend!r}): column {name!r} ({t}) holds{value or ' a value'} "
        f"which {types} cannot hold ({type(err).__name__}: {err}); use the default dtype_backend='pyarrow'{fix} "
        f"(pandas.ArrowDtype columns hold every Arrow value), or fix the value"
    )


class _NoColumn(LayoutError, KeyError):
    """``soa[name]`` of a name that is not a leaf column: a LayoutError, and a KeyError
    (what a mapping raises) whose text is the message, not its repr."""

    def __str__(self) -> str:
        return str(self.args[0])


def _no_column(names, name):
    """Why ``soa[name]`` has no column: the leaves of ``name`` if it is a complex or
    struct field (whose leaves are ``name.re``, ``name.x``...), else the columns there are."""
    leaves = [n for n in names if isinstance(name, str) and n.startswith(name + ".")]
    if not leaves:
        return f"no leaf column {name!r}; columns are {names}"
    top = name.split(".")[0]
    whole = (
        f"the whole field as an Arrow struct column with soa.to_arrow().column({name!r})"
        if top == name
        else f"the Arrow struct column that holds it, soa.to_arrow().column({top!r})"
    )
    return (
        f"no leaf column {name!r}: {name!r} is a complex or struct field, whose leaf columns are "
        f"{', '.join(map(repr, leaves))}; take one of those (soa[{leaves[0]!r}]), or {whole}"
    )


def _writable_records(out, layout, n, columns):
    """``out`` as ``n`` records to write, after checking it can take them and shares no
    memory with the columns that will be read (``columns``: pyarrow arrays)."""
    arr = out.array if isinstance(out, AoS) else out
    if not isinstance(arr, np.ndarray) or not arr.flags.writeable or not arr.flags.c_contiguous:
        raise LayoutError("out= must be a writable, C-contiguous NumPy array (or an AoS over one)")
    if arr.dtype != layout.dtype and arr.dtype not in (np.uint8, np.int8):
        raise LayoutError(
            f"out= has dtype {arr.dtype}; records of this layout are {layout.dtype} (or raw bytes): written "
            f"into another type, the array would show garbage. Pass np.empty(n, layout.dtype), or a uint8 "
            f"view of the memory (out.view(np.uint8))"
        )
    if arr.nbytes < n * layout.itemsize:
        raise LayoutError(
            f"out= has {arr.nbytes} bytes; {n} records of {layout.itemsize} bytes need {n * layout.itemsize}"
        )
    records = arr.reshape(-1).view(np.uint8)[: n * layout.itemsize]
    for field, column in zip(layout.fields, columns):
        if any(b is not None and overlaps(b, records) for b in (column.validity, column.offsets, column.data)):
            raise LayoutError(
                f"out= shares memory with column {field.name!r} being written into it: the records would "
                f"overwrite values not read yet. Pass an out= array of its own memory (or none)"
            )
    return records.view(layout.dtype)


class Column:
    """One leaf column of an SoA.

    ``numpy.asarray(col)`` is a view of the column's values (no copy) for integers,
    floats, timestamps/durations and fixed-size bytes, shaped ``(length, *sub-array
    shape)``; ``__dlpack__`` hands the same memory to PyTorch or CuPy. Bit-packed
    booleans, ``date32`` and var-length strings have no NumPy equivalent: converting
    them copies, and ``copy=False`` refuses. Under a null the view shows the raw value
    (the sentinel); see :attr:`null_count` and :meth:`to_arrow`.
    """

    def __init__(self, soa: SoA, index: int) -> None:
        self._soa, self._index = soa, index
        self.field = soa.layout.fields[index]
        self._buffers = soa._columns[index]

    def __reduce__(self) -> "tuple[Any, ...]":
        return Column, (self._soa, self._index)

    @property
    def name(self) -> str:
        return self.field.name

    def __len__(self) -> int:
        return len(self._soa)

    def __repr__(self) -> str:
        return f"<Column {self.name!r}: {len(self)} x {self._buffers.type}>"

    @property
    def device(self) -> str:
        return self._soa.device

    @property
    def null_count(self) -> int:
        """Nulls among the column's elements."""
        if not self._soa._backend.host:
            return self._host().null_count
        self._soa._current("Column.null_count")
        return self._buffers.to_array().null_count

    def _host(self):
        return self._soa.to_device("cpu")[self.name]

    def to_arrow(self) -> pa.Array:
        """The column as a pyarrow.Array (fixed_size_list for sub-arrays), no copy."""
        from ._layout import _wrap

        self._soa._on_host("Column.to_arrow")
        arr = self._soa._exported(self._buffers, self._soa._export())
        return _assemble(_wrap(arr.type, self.field.shape), len(self), iter([arr]))

    def __arrow_c_array__(self, requested_schema: Any = None) -> "tuple[Any, Any]":
        return self.to_arrow().__arrow_c_array__(requested_schema)

    def _view_dtype(self):
        f, t = self.field, self._buffers.type
        if self._buffers.kind in ("copy", "bytes") and f.kind in ("copy", "bytes"):
            return native_dtype(f)
        if pa.types.is_timestamp(t) or pa.types.is_duration(t):
            return np.dtype(f"{'M' if pa.types.is_timestamp(t) else 'm'}8[{t.unit}]")
        return None

    def to_numpy(self, copy: "bool | None" = None) -> np.ndarray:
        """The values as a NumPy array; a view unless the Arrow storage forbids one."""
        if not self._soa._backend.host:
            raise TypeError(
                f"column {self.name!r} is on the GPU; NumPy cannot view it: use cupy.asarray(col) (no copy) "
                f"or soa.to_device('cpu')"
            )
        self._soa._current("Column.to_numpy")
        shape = (len(self),) + self.field.shape
        dt = self._view_dtype()
        b = self._buffers
        if dt is not None:
            view = np.frombuffer(b.data.arrow(), dtype=dt, count=b.length, offset=b.offset * dt.itemsize)
            if not copy:
                return view.reshape(shape)
        elif copy is False:
            raise ValueError(
                f"column {self.name!r} is {b.type} in Arrow, which NumPy cannot view without a "
                f"copy; call with copy=None or use to_arrow()"
            )
        with claimed("Column.to_numpy", (), self._soa._reads()):  # a copy is never of memory being rewritten
            self._soa._current("Column.to_numpy")
            if dt is not None:
                return view.reshape(shape).copy()
            return b.to_array().to_numpy(zero_copy_only=False).reshape(shape)

    def __array__(self, dtype: Any = None, copy: "bool | None" = None) -> np.ndarray:
        arr = self.to_numpy(copy=copy)
        return arr if dtype is None else arr.astype(dtype, copy=bool(copy))

    @property
    def __cuda_array_interface__(self) -> "dict[str, Any]":
        """The values on the GPU, for CuPy, Numba and PyTorch (no copy; already
        synchronised, so ``stream`` is None). Nulls are not described: see null_count."""
        soa = self._soa
        return soa._backend.column_interface(
            soa._memory, self._buffers, self._view_dtype(), (len(self),) + self.field.shape, self.name
        )

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._soa._backend.dlpack(self, **kwargs)

    def __dlpack_device__(self) -> "tuple[int, int]":
        return self._soa._backend.dlpack_device()


def _nullable_dtypes(pd):
    """Arrow type -> pandas nullable dtype, for ``to_pandas(dtype_backend="numpy_nullable")``."""
    ints = {
        f"{sign}int{bits}": getattr(pd, f"{'U' if sign else ''}Int{bits}Dtype")()
        for sign in ("", "u")
        for bits in (8, 16, 32, 64)
    }
    mapping = {getattr(pa, name)(): dtype for name, dtype in ints.items()}
    mapping.update(
        {
            pa.float32(): pd.Float32Dtype(),
            pa.float64(): pd.Float64Dtype(),
            pa.bool_(): pd.BooleanDtype(),
            pa.string(): pd.StringDtype(),
            pa.large_string(): pd.StringDtype(),
        }
    )
    return mapping
