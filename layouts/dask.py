"""Record files as Dask DataFrames: many files, or files larger than one machine.

Each partition is one byte range of one file, cut on record boundaries; its task reads
that range and nothing else, and transposes it with this library's one-pass kernel.

>>> import layouts.dask as ld                                      # doctest: +SKIP
>>> df = ld.read_records("ticks/*.bin", layout, blocksize="128MiB")  # doctest: +SKIP
>>> df[df.qty > 100].px.mean().compute()                          # doctest: +SKIP

Needs the ``dask`` extra (``pip install 'layouts-arrow[dask]'``); nothing here imports Dask
until it is called.
"""

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ._aos import AoS, as_layout, checked_nulls
from ._errors import LayoutError
from ._files import check_trailing, whole_records

if TYPE_CHECKING:
    from ._layout import Layout

__all__ = ["read_records", "byte_ranges", "read_range"]

DEVICES = ("cpu", "cuda")


def read_records(paths: "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]",
                 layout: "Layout | np.typing.DTypeLike", *, blocksize: "int | str" = "128MiB", offset: int = 0,
                 trailing: str = "error", nulls: "Mapping[str, Any] | None" = None, device: str = "cpu",
                 storage_options: "dict[str, Any] | None" = None) -> Any:
    """Record files as a lazy ``dask.dataframe.DataFrame``, one partition per byte range.

    Parameters
    ----------
    paths : str, os.PathLike or list of them
        Files, glob patterns (``"data/*.bin"``) or fsspec URLs (``"s3://bucket/*.bin"``).
        Every worker must be able to open them (a shared file system on a cluster).
    layout : Layout or numpy.dtype
        The record type, e.g. ``Layout.from_c(header, "struct tick")``.
    blocksize : int or str
        Target bytes per partition (``"64MiB"``), rounded down to whole records.
    offset : int
        Bytes of header at the start of every file, before its first record.
    trailing : {"error", "ignore"}
        A file whose bytes after ``offset`` are not a whole number of records is an error
        stating its sizes (default), or a warning and the partial record is skipped.
    nulls : dict, optional
        Sentinel values that mean "missing", as in :meth:`AoS.to_soa`.
    device : {"cpu", "cuda"}
        ``"cpu"``: partitions are pandas DataFrames of ``pandas.ArrowDtype`` columns over
        the Arrow buffers. ``"cuda"``: cuDF DataFrames (needs cuDF and dask-cudf), made
        on the GPU: each task copies its byte range to the device once, transposes it
        there and hands the device columns to cuDF without a copy (``SoA.to_cudf``).
    storage_options : dict, optional
        Passed to fsspec to open the files (credentials for remote stores).

    Returns
    -------
    dask.dataframe.DataFrame
        Indexed by record number across all files in order, with known divisions, so
        ``df.loc[i]`` finds record ``i`` without reading other partitions.
    """
    dd, fsspec = _require_dask()
    from dask.utils import parse_bytes

    layout = as_layout(layout)
    check_trailing(trailing)
    if device not in DEVICES:
        raise LayoutError(f"device must be one of {DEVICES}, got {device!r}")
    size = blocksize
    if isinstance(size, str):
        try:
            size = parse_bytes(size)
        except ValueError:
            pass
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size <= 0:
        raise LayoutError(f"blocksize must be a positive number of bytes or a size like '64MiB', got {blocksize!r}")
    nulls = checked_nulls(layout, nulls)
    if device == "cuda":
        _require_cudf()

    fs, _, names = fsspec.core.get_fs_token_paths(paths, mode="rb", storage_options=storage_options or {})
    if not names:
        raise LayoutError(f"no files match {paths!r}; check the path or glob pattern")
    sizes = [fs.size(name) for name in names]
    parts = byte_ranges(names, sizes, layout.itemsize, size, offset=offset, trailing=trailing)
    options = (layout, nulls, device)
    meta = _empty_part(options)
    if not parts:  # files with no records: one empty partition, same columns
        return dd.from_map(_empty_part, [options], meta=meta, enforce_metadata=False)
    first_rows = [p[3] for p in parts]
    divisions = (*first_rows, first_rows[-1] + (parts[-1][2] - parts[-1][1]) // layout.itemsize - 1)
    return dd.from_map(
        _Task(fs, options), parts, meta=meta, divisions=divisions, label="layouts-read-records",
        enforce_metadata=False,
    )


def byte_ranges(names, sizes, itemsize, blocksize, *, offset=0, trailing="error"):
    """``[(name, start, stop, first_row)]``: each file after its ``offset`` header, cut
    into ranges of whole records of about ``blocksize`` bytes (at least one record);
    ``first_row`` counts records across all files. Files with no records give no range."""
    per_block = max(1, int(blocksize) // itemsize) * itemsize
    parts, row = [], 0
    for name, size in zip(names, sizes):
        end = offset + whole_records(name, size, offset, itemsize, trailing, stacklevel=4) * itemsize
        for start in range(offset, end, per_block):
            stop = min(start + per_block, end)
            parts.append((name, start, stop, row))
            row += (stop - start) // itemsize
    return parts


def read_range(f, start, stop):
    """Exactly bytes ``[start, stop)`` of an open binary file, as a NumPy byte array."""
    out = np.empty(stop - start, np.uint8)
    f.seek(start)
    view, got = memoryview(out), 0
    while got < len(out):
        n = f.readinto(view[got:])
        if not n:
            raise LayoutError(
                f"{getattr(f, 'path', f)} ended at byte {start + got}, before the end of the "
                f"byte range [{start}, {stop}) planned from its size; was the file cut short "
                f"after read_records listed it?"
            )
        got += n
    return out


class _Task:
    """One partition: read a byte range, transpose it, wrap the columns as a frame.

    On ``"cuda"`` the range's record bytes go to the GPU in one host-to-device copy,
    the device kernel transposes them into one arena there, and cuDF wraps the arena's
    columns: no copy back to the host."""

    def __init__(self, fs, options):
        self.fs, self.options = fs, options

    def __call__(self, part):
        name, start, stop, first_row = part
        layout, nulls, device = self.options
        if _is_local(self.fs):  # map just this range: the kernel reads the page cache directly
            raw = np.memmap(name, np.uint8, mode="r", offset=start, shape=(stop - start,))
        else:
            with self.fs.open(name, "rb") as f:
                raw = read_range(f, start, stop)
        if device == "cuda":
            return _device_frame(AoS(raw, layout).to_soa(nulls=nulls, device="cuda"), first_row)
        table = AoS(raw, layout).to_soa(nulls=nulls, threads=1).to_arrow()
        return _frame(table, first_row)


def _is_local(fs):
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol
    return "file" in protocols


def _empty_part(options):
    layout, nulls, device = options
    if device == "cuda":
        return _device_frame(AoS(b"", layout).to_soa(nulls=nulls, device="cuda"), 0)
    return _frame(AoS(b"", layout).to_soa(nulls=nulls).to_arrow(), 0)


def _frame(table, first_row):
    """A partition over the Arrow buffers: pandas ``ArrowDtype`` columns, no copy."""
    import pandas as pd

    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    frame.index = pd.RangeIndex(first_row, first_row + table.num_rows)
    return frame


def _device_frame(soa, first_row):
    """A partition over a device SoA's arena: a cuDF frame wrapping its columns (see
    ``SoA.to_cudf`` for the few it converts on the device), indexed by record number."""
    cudf = _require_cudf()
    frame = soa.to_cudf()
    frame.index = cudf.RangeIndex(first_row, first_row + len(soa))
    return frame


def _require_dask():
    try:
        import dask.dataframe as dd
        import fsspec
    except ImportError as err:
        raise ImportError(
            f"layouts.dask needs Dask's DataFrame ({err.name} is missing): pip install 'layouts-arrow[dask]'"
        ) from None
    return dd, fsspec


def _require_cudf():
    try:
        import cudf
        import dask_cudf  # noqa: F401  (registers cuDF partitions with Dask)
    except ImportError as err:
        raise ImportError(
            f"device='cuda' partitions need cuDF and dask-cudf ({err.name} is missing): install "
            f"them from RAPIDS for your CUDA version, e.g. pip install cudf-cu12 dask-cudf-cu12"
        ) from None
    return cudf
