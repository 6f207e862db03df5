"""layouts.dask: record files as Dask DataFrames, on a real two-process LocalCluster."""

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
fsspec = pytest.importorskip("fsspec")

from dask_audit import AuditFileSystem  # noqa: E402

import layouts.dask as ld  # noqa: E402

fsspec.register_implementation("audit", AuditFileSystem, clobber=True)

HEADER = """
#include <stdint.h>
enum side { BUY = 1, SELL = 2 };
struct rec {
    int64_t ts;
    double px;
    int32_t qty;
    uint16_t venue : 5, lot : 11;
    enum side side;
    char sym[6];
};
"""
LAYOUT = lo.Layout.from_c(HEADER, "struct rec", byteorder="big")
HEADER_BYTES = 16
BLOCK_RECORDS = 1000
SIZES = [2500, 1000, 37, 0, 3001]  # records per file: not a multiple of the block, exact, small, empty


def records(n, seed):
    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "ts": pa.array(np.arange(n, dtype=np.int64) + seed * 10**6),
            "px": pa.array(rng.normal(100, 5, n)),
            "qty": pa.array(rng.integers(-50, 500, n, dtype=np.int32)),
            "venue": pa.array(rng.integers(0, 32, n, dtype=np.uint16)),
            "lot": pa.array(rng.integers(0, 2048, n, dtype=np.uint16)),
            "side": pa.array(rng.choice(["BUY", "SELL"], n)),
            "sym": pa.array(rng.choice([b"AAPL\0\0", b"MSFT\0\0", b"GOOGL\0"], n), pa.binary(6)),
        }
    )
    return lo.SoA.from_arrow(table, LAYOUT).to_aos().array.tobytes()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    paths = []
    for i, n in enumerate(SIZES):
        path = folder / f"part-{i}.bin"
        path.write_bytes(b"H" * HEADER_BYTES + records(n, i))
        paths.append(path)
    return folder, paths


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",  # (a free port: the other cluster test may run at the same time)
        worker_dashboard_address=None,
    ) as cluster:
        with distributed.Client(cluster) as client:
            # workers unpickle the audit file system from this folder
            client.run(sys.path.insert, 0, str(Path(__file__).parent))
            yield client


def single_process(paths):
    tables = [lo.read_records(p, LAYOUT, offset=HEADER_BYTES).to_soa().to_arrow() for p in paths]
    return pa.concat_tables(tables).combine_chunks()


@pytest.mark.slow
def test_the_cluster_result_equals_one_process_row_for_row(files, client):
    folder, paths = files
    df = ld.read_records(
        str(folder / "part-*.bin"), LAYOUT, offset=HEADER_BYTES, blocksize=BLOCK_RECORDS * LAYOUT.itemsize
    )
    assert df.npartitions == 3 + 1 + 1 + 4  # 2500 -> 3 blocks, 1000 -> 1, 37 -> 1, empty -> 0, 3001 -> 4
    assert df.divisions == (0, 1000, 2000, 2500, 3500, 3537, 4537, 5537, 6537, 6537)
    frame = client.compute(df).result()
    assert list(frame.index) == list(range(sum(SIZES)))
    got = pa.Table.from_pandas(frame, preserve_index=False).combine_chunks()
    assert got.equals(single_process(paths))
    assert frame.dtypes.map(str).tolist() == [
        "int64[pyarrow]",
        "double[pyarrow]",
        "int32[pyarrow]",
        "uint16[pyarrow]",
        "uint16[pyarrow]",
        "dictionary<values=string, indices=int32, ordered=0>[pyarrow]",
        "fixed_size_binary[6][pyarrow]",
    ]


@pytest.mark.slow  # (subprocesses, 2.5 s: the fast loop keeps the lighter ones)
def test_no_task_reads_outside_its_byte_range(files, client, tmp_path):
    folder, paths = files
    log = tmp_path / "reads.log"
    block = BLOCK_RECORDS * LAYOUT.itemsize
    df = ld.read_records(
        [f"audit://{p}" for p in paths], LAYOUT, offset=HEADER_BYTES, blocksize=block, storage_options={"log": str(log)}
    )
    assert client.compute(df.qty.sum()).result() == pa.compute.sum(single_process(paths)["qty"]).as_py()
    planned = ld.byte_ranges(
        [str(p) for p in paths], [p.stat().st_size for p in paths], LAYOUT.itemsize, block, offset=HEADER_BYTES
    )
    reads = [line.split() for line in log.read_text().splitlines()]
    assert reads, "the audit file system logged no reads"
    covered = {}
    for path, start, stop in reads:
        start, stop = int(start), int(stop)
        inside = [(name, s, e) for name, s, e, _ in planned if name == path and s <= start and stop <= e]
        assert inside, f"read {path} [{start}, {stop}) is outside every planned range"
        covered[inside[0]] = covered.get(inside[0], 0) + stop - start
    assert covered == {(name, s, e): e - s for name, s, e, _ in planned}  # each range read once, whole


@pytest.mark.slow
def test_reductions_and_filters_through_dask(files, client):
    folder, paths = files
    df = ld.read_records(str(folder / "part-*.bin"), LAYOUT, offset=HEADER_BYTES, blocksize="40KiB", nulls={"qty": -1})
    whole = single_process(paths)
    qty = np.asarray(whole["qty"], dtype=np.float64)
    valid = qty != -1
    got = client.compute(
        [
            df.qty.sum(),
            df.qty.min(),
            df.qty.max(),
            df.px.mean(),
            (df.qty > 100).sum(),
            df[df.side == "SELL"].px.count(),
            df.qty.count(),
        ]
    )
    got = client.gather(got)
    assert got[0] == qty[valid].sum() and got[1] == qty[valid].min() and got[2] == qty[valid].max()
    assert got[3] == pytest.approx(np.asarray(whole["px"]).mean(), rel=1e-12)
    assert got[4] == (qty[valid] > 100).sum()
    assert got[5] == (np.asarray(whole["side"].cast(pa.string())) == "SELL").sum()
    assert got[6] == valid.sum() < len(qty)  # -1 became null, in the kernel's pass
    assert client.compute(df.loc[4000]).result()["ts"].iloc[0] == whole["ts"][4000].as_py()


@pytest.mark.slow
def test_to_parquet_is_readable_by_pyarrow_polars_and_duckdb(files, client, tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    folder, paths = files
    df = ld.read_records(str(folder / "part-*.bin"), LAYOUT, offset=HEADER_BYTES, blocksize="64KiB")
    out = tmp_path / "dataset"
    client.compute(df.to_parquet(str(out), write_index=False, compute=False)).result()
    whole = single_process(paths)
    back = pq.read_table(out).combine_chunks()
    assert back.num_rows == whole.num_rows
    for name in whole.column_names:
        assert back[name].to_pylist() == whole[name].to_pylist(), name
    assert pl.read_parquet(str(out / "*.parquet"))["qty"].sum() == pa.compute.sum(whole["qty"]).as_py()
    assert duckdb.sql(f"select count(*), max(ts) from '{out}/*.parquet'").fetchall()[0] == (
        whole.num_rows,
        pa.compute.max(whole["ts"]).as_py(),
    )


def test_trailing_partial_record_and_header(tmp_path):
    good = tmp_path / "good.bin"
    good.write_bytes(b"H" * HEADER_BYTES + records(10, 1))
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"H" * HEADER_BYTES + records(5, 2) + b"xyz")
    size = bad.stat().st_size
    with pytest.raises(
        lo.LayoutError,
        match=rf"bad.bin is {size} bytes: after the 16-byte header that is 5 "
        rf"records of {LAYOUT.itemsize} bytes and 3 bytes left over.*trailing='ignore'",
    ):
        ld.read_records([str(good), str(bad)], LAYOUT, offset=HEADER_BYTES)
    with pytest.warns(UserWarning, match=r"bad.bin .* skipped those 3 bytes"):
        df = ld.read_records([str(good), str(bad)], LAYOUT, offset=HEADER_BYTES, trailing="ignore")
    frame = df.compute(scheduler="sync")
    assert len(frame) == 15 and frame.index.tolist() == list(range(15))
    with pytest.raises(lo.LayoutError, match=r"good.bin is \d+ bytes, shorter than the 100000-byte header offset"):
        ld.read_records(str(good), LAYOUT, offset=100_000)


def test_files_with_no_records_give_one_empty_partition(tmp_path):
    (tmp_path / "empty.bin").write_bytes(b"")
    df = ld.read_records(str(tmp_path / "*.bin"), LAYOUT)
    frame = df.compute(scheduler="sync")
    assert len(frame) == 0 and list(frame.columns) == LAYOUT.names


def test_argument_errors_name_the_argument(tmp_path):
    (tmp_path / "a.bin").write_bytes(records(3, 0))
    cases = [
        (dict(paths=str(tmp_path / "nothing-*.bin")), r"no files match .*nothing-\*\.bin.*check the path"),
        (dict(blocksize=0), r"blocksize must be a positive number of bytes or a size like '64MiB', got 0"),
        (dict(blocksize="lots"), r"blocksize must be a positive number of bytes or a size like '64MiB', got 'lots'"),
        (dict(device="tpu"), r"device must be one of \('cpu', 'cuda'\), got 'tpu'"),
        (dict(trailing="drop"), r"trailing must be one of \('error', 'ignore'\), got 'drop'"),
        (dict(nulls={"nope": 0}), r"nulls names \['nope'\], which are not leaf fields"),
    ]
    for kwargs, message in cases:
        kwargs.setdefault("paths", str(tmp_path / "a.bin"))
        with pytest.raises((lo.LayoutError, ValueError), match=message):
            ld.read_records(layout=LAYOUT, **kwargs)


def test_missing_packages_name_the_extra(monkeypatch, tmp_path):
    (tmp_path / "a.bin").write_bytes(records(3, 0))
    monkeypatch.setitem(sys.modules, "cudf", None)
    with pytest.raises(ImportError, match=r"device='cuda' partitions need cuDF and dask-cudf \(cudf is missing\)"):
        ld.read_records(str(tmp_path / "a.bin"), LAYOUT, device="cuda")
    monkeypatch.setitem(sys.modules, "dask.dataframe", None)
    with pytest.raises(ImportError, match=r"pip install 'layouts-arrow\[dask\]'"):
        ld.read_records(str(tmp_path / "a.bin"), LAYOUT)


def test_partitions_are_arrow_buffers_from_one_pass(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(records(100, 3))
    part = ld.read_records(str(path), LAYOUT, blocksize="1MiB").partitions[0].compute(scheduler="sync")
    arrays = [part[name].array._pa_array for name in ("ts", "px")]
    # both columns live in the one arena the kernel wrote: no pandas conversion in between
    addresses = [a.chunks[0].buffers()[1].address for a in arrays]
    arena = lo.read_records(path, LAYOUT).to_soa()
    assert abs(addresses[1] - addresses[0]) == abs(
        arena["px"].to_arrow().buffers()[1].address - arena["ts"].to_arrow().buffers()[1].address
    )


@pytest.mark.slow
def test_a_file_cut_short_after_planning_is_an_error():
    import io

    with pytest.raises(
        lo.LayoutError,
        match=r"ended at byte 30, before the end of the byte range \[10, 50\) "
        r"planned from its size; was the file cut short",
    ):
        ld.read_range(io.BytesIO(bytes(30)), 10, 50)
    assert ld.read_range(io.BytesIO(bytes(range(60))), 10, 50).tolist() == list(range(10, 50))
