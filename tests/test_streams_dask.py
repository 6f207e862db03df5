"""layouts.dask.read_stream: many stream files as one Dask DataFrame per record type,
one partition per file; against read_stream of each file, on a real LocalCluster too."""

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import layouts as lo

dd = pytest.importorskip("dask.dataframe")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
fsspec = pytest.importorskip("fsspec")

import layouts.dask as ld  # noqa: E402
from dask_audit import AuditFileSystem  # noqa: E402
from test_streams import ITCH, _packets, _pcap_by_hand, _rdw, _tagged, _tagged_bytes, itch_file  # noqa: E402

fsspec.register_implementation("audit", AuditFileSystem, clobber=True)
HERE = Path(__file__).parent
S = lo.Stream


@pytest.fixture(scope="module")
def itch_files(tmp_path_factory):
    """Three ITCH 5.0 files of every message type, and an empty one."""
    folder = tmp_path_factory.mktemp("itch")
    rng = np.random.default_rng(26)
    paths = []
    for i, n in enumerate([400, 0, 150, 33]):
        raw, _ = itch_file(rng, list(ITCH), n) if n else (b"", None)
        path = folder / f"day{i}.itch"
        path.write_bytes(raw)
        paths.append(path)
    return folder, paths


@pytest.fixture(scope="module")
def pcap_files(tmp_path_factory):
    """pcap files in both byte orders, micro- and nanoseconds, one with no packets."""
    folder = tmp_path_factory.mktemp("pcap")
    rng = np.random.default_rng(27)
    paths = []
    for i, (order, nano, n) in enumerate([("<", False, 40), (">", True, 25), ("<", True, 0), (">", False, 7)]):
        path = folder / f"cap{i}.pcap"
        path.write_bytes(_pcap_by_hand(order, nano, _packets(rng, n)))
        paths.append(path)
    return folder, paths


def expected(paths, spec, name, file_column="_file"):
    """What the frame of ``name`` should hold: read_stream of each file, concatenated,
    with the file column."""
    names = [str(p) for p in paths]
    files = pd.CategoricalDtype(names, ordered=True)
    frames = []
    for i, p in enumerate(paths):
        tables = lo.read_stream(p, spec)
        table = tables[name].to_arrow() if name in tables else ld.stream_schemas(spec)[name].empty_table()
        frame = table.to_pandas(types_mapper=pd.ArrowDtype)
        frame.insert(0, file_column, pd.Categorical.from_codes([i] * len(frame), dtype=files))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def check_frames(frames, paths, spec):
    computed = dask.compute(frames, scheduler="sync")[0]
    for name, frame in computed.items():
        want = expected(paths, spec, name)
        assert frame.dtypes.equals(frames[name].dtypes), name  # meta, computed without reading, is what comes
        pd.testing.assert_frame_equal(frame.reset_index(drop=True), want, check_exact=True)
    return computed


def test_itch_files_one_frame_per_message_type(itch_files):
    folder, paths = itch_files
    frames = ld.read_stream(str(folder / "day*.itch"), "itch50")
    assert list(frames) == [n for n in ld.stream_schemas("itch50") if not n.startswith("_")]
    assert len(frames) == 23 and all(f.npartitions == len(paths) for f in frames.values())
    computed = check_frames(frames, paths, "itch50")
    assert sum(len(f) for f in computed.values()) == 400 + 150 + 33
    add = computed["add_order"]
    assert add["_file"].cat.categories.tolist() == [str(p) for p in paths] and add["_file"].cat.ordered
    assert str(add["price"].dtype) == "uint32[pyarrow]" and str(add["stock"].dtype) == "string[pyarrow]"
    # _file and _offset identify a record: unique, and the order of the stream comes back
    every = pd.concat([f[["_file", "_offset"]] for f in computed.values()]).sort_values(["_file", "_offset"])
    assert not every.duplicated().any()
    assert every[every._file == str(paths[3])]._offset.iloc[0] == 0


def test_pcap_files_both_orders_with_reserved_tables(pcap_files):
    folder, paths = pcap_files
    frames = ld.read_stream([str(p) for p in paths], "pcap", types=["packet", "_header", "_gaps"])
    assert list(frames) == ["packet", "_header", "_gaps"]
    computed = check_frames(frames, paths, "pcap")
    assert len(computed["packet"]) == 40 + 25 + 7
    assert computed["_header"]["magic"].tolist() == [0xA1B2C3D4, 0xA1B23C4D, 0xA1B23C4D, 0xA1B2C3D4]
    assert len(computed["_gaps"]) == 0 and str(computed["packet"]["_tail"].dtype) == "binary[pyarrow]"
    assert list(ld.read_stream(str(folder / "*.pcap"), "pcap")) == ["packet"]  # reserved tables only if asked


def test_reserved_tables_blocks_unknown_prefix_and_gaps(tmp_path):
    # VB blocks (_blocks, _prefix), a tagged stream with unknown tags kept (_unknown), a trailing gap (_gaps)
    rec = np.dtype([("id", ">u4"), ("name", "S6")])
    recs = [_rdw(struct.pack(">I", i) + b"NAME%02d" % i) for i in range(5)]
    for i, blocks in enumerate([[recs[:3], recs[3:]], [recs[4:]]]):
        (tmp_path / f"vb{i}.dat").write_bytes(b"".join(struct.pack(">HH", 4 + sum(map(len, b)), 0) + b"".join(b)
                                                       for b in blocks))
    vb = sorted(tmp_path.glob("vb*.dat"))
    frames = ld.read_stream(str(tmp_path / "vb*.dat"), S.bdw(rec), types=["record", "_blocks"])
    got = check_frames(frames, vb, S.bdw(rec))
    assert got["_blocks"]["_offset"].tolist() == [0, 46, 0] and str(got["record"]["_prefix"].dtype).startswith(
        "fixed_size_binary[4]")
    for i, raw in enumerate([_tagged_bytes(), _tagged_bytes()[:10]]):
        (tmp_path / f"t{i}.bin").write_bytes(raw)
    tagged = sorted(tmp_path.glob("t*.bin"))
    frames = ld.read_stream(str(tmp_path / "t*.bin"), _tagged("keep"), types=["a", "b", "_unknown", "_gaps"])
    got = check_frames(frames, tagged, _tagged("keep"))
    assert got["_unknown"]["_offset"].tolist() == [10] and got["a"]["v"].tolist() == [7, 9, 7]


def test_schemas_are_read_streams_own_for_every_builtin_and_an_empty_file():
    for spec, empty in [("itch50", b""), (S.bdw([("id", ">u4")]), b""), (_tagged("keep"), b"")]:
        tables = lo.read_stream(empty, spec)
        schemas = ld.stream_schemas(spec)
        for name, soa in tables.items():
            assert soa.to_arrow().schema.equals(schemas[name]), name
    pcap = lo.read_stream(_pcap_by_hand("<", False, []), "pcap")
    schemas = ld.stream_schemas("pcap")
    assert list(schemas) == ["packet", "_header", "_gaps"]
    assert all(pcap[n].to_arrow().schema.equals(schemas[n]) for n in pcap)


def test_several_types_computed_together_read_each_file_once(itch_files, monkeypatch):
    folder, paths = itch_files
    from layouts._stream import read

    calls = []
    real = read.read_stream

    def counted(src, spec):
        calls.append(str(src))
        return real(src, spec)

    monkeypatch.setattr(read, "read_stream", counted)
    frames = ld.read_stream(str(folder / "day*.itch"), "itch50")
    assert calls == []  # the graph and meta come from the description and the names
    dask.compute(frames["add_order"], frames["trade"].shares.sum(), frames["system_event"], scheduler="sync")
    assert sorted(calls) == sorted(str(p) for p in paths)


def test_a_damaged_file_names_itself_when_its_partition_computes(itch_files, tmp_path):
    folder, paths = itch_files
    bad = tmp_path / "bad.itch"
    raw = paths[2].read_bytes()
    bad.write_bytes(raw[:-5])  # the last message cut short
    frames = ld.read_stream([str(paths[0]), str(bad)], "itch50")
    assert len(frames["add_order"].partitions[0].compute(scheduler="sync")) > 0  # the good file alone is fine
    with pytest.raises(lo.ConversionError, match=rf"^{str(bad)!r}".replace("'", "") + r": byte \d+: the record's "
                       r"length field \(byte \d+\) says \d+, a record of \d+ bytes, past the end of the data"):
        frames["add_order"].compute(scheduler="sync")
    # through fsspec (not mapped: the bytes are read, and the message names the file, not <buffer>)
    frames = ld.read_stream([f"audit://{bad}"], "itch50", storage_options={"log": str(tmp_path / "log")})
    with pytest.raises(lo.ConversionError, match=rf"^{bad}: byte \d+: the record's length field"):
        frames["trade"].compute(scheduler="sync")
    (tmp_path / "zero.pcap").write_bytes(b"\0" * 40)
    frames = ld.read_stream(str(tmp_path / "zero.pcap"), "pcap")
    with pytest.raises(lo.ConversionError, match=rf"^{tmp_path / 'zero.pcap'}: byte 0: magic number 00000000 is "
                                                 r"none of 0xa1b2c3d4"):
        frames["packet"].compute(scheduler="sync")


def test_description_and_argument_errors_come_when_the_graph_is_built(pcap_files, tmp_path):
    folder, paths = pcap_files
    toml = tmp_path / "bad.toml"
    toml.write_text('[[section]]\nframing = { size = "n + 1" }\n[section.types.x]\nfields = [["a", "u1"]]\n')
    with pytest.raises(lo.LayoutError, match=r"bad.toml: section\[0\].framing.size: 'n \+ 1' names 'n', which is no "
                                             r"integer field of the header"):
        ld.read_stream(str(folder / "*.pcap"), str(toml))
    with pytest.raises(lo.LayoutError, match=r"types names 'packets', which is no table of this stream; its record "
                                             r"types: packet; reserved tables it can have: _header, _gaps"):
        ld.read_stream(str(folder / "*.pcap"), "pcap", types=["packets"])
    with pytest.raises(lo.LayoutError, match=r"types names 'packet' twice"):
        ld.read_stream(str(folder / "*.pcap"), "pcap", types=["packet", "packet"])
    with pytest.raises(lo.LayoutError, match=r"table 'packet' has a column named 'ts_sec'; pass another "
                                             r"file_column="):
        ld.read_stream(str(folder / "*.pcap"), "pcap", file_column="ts_sec")
    with pytest.raises(lo.LayoutError, match=r"no files match .*nothing-\*\.pcap.*; check the path"):
        ld.read_stream(str(folder / "nothing-*.pcap"), "pcap")
    with pytest.raises(lo.LayoutError, match=r"unknown built-in|no built-in|built-in"):
        ld.read_stream(str(folder / "*.pcap"), "pcapng")


def test_the_file_column_can_be_renamed_and_types_given_one_by_name(pcap_files):
    folder, paths = pcap_files
    frames = ld.read_stream(str(folder / "*.pcap"), "pcap", types="_header", file_column="path")
    got = frames["_header"].compute(scheduler="sync")
    assert list(got.columns[:2]) == ["path", "_offset"] and got["path"].tolist() == [str(p) for p in paths]


def test_large_binary_tails_become_binary_chunks_of_the_planned_type():
    tails = pa.array([b"ab", b"", b"cdef", b"g", b"hi"], pa.large_binary()).slice(1)
    table = pa.table({"_offset": pa.array([1, 2, 3, 4], pa.int64()), "_tail": tails})
    schema = pa.schema([("_offset", pa.int64()), ("_tail", pa.binary())])
    got = ld._as_schema(table, schema, limit=4)
    assert got.schema.equals(schema)
    assert [c.to_pylist() for c in got.column("_tail").chunks] == [[b"", b"cdef"], [b"g", b"hi"]]  # <= 4 bytes each
    assert got.column("_tail").to_pylist() == [b"", b"cdef", b"g", b"hi"]
    with pytest.raises(lo.LayoutError, match=r"column '_offset' is int64, but int32 was planned; please report"):
        ld._as_schema(table, pa.schema([("_offset", pa.int32()), ("_tail", pa.binary())]))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGBUS on a truncated mapping, Linux")
def test_a_file_that_shrinks_while_its_partition_reads_it(tmp_path):
    path = tmp_path / "day.itch"
    code = textwrap.dedent(f"""
        import os, sys
        import numpy as np
        import layouts as lo, layouts.dask as ld
        from layouts._stream import read
        sys.path.insert(0, {str(HERE)!r})
        from test_streams import itch_file, ITCH
        raw, _ = itch_file(np.random.default_rng(1), list(ITCH), 3000)
        path = {str(path)!r}
        open(path, "wb").write(raw)
        frames = ld.read_stream(path, "itch50")
        real = read.scan_section

        def shrink_then_scan(*args, **kwargs):  # the file is mapped by now
            os.truncate(path, 4096)
            return real(*args, **kwargs)

        read.scan_section = shrink_then_scan
        try:
            frames["add_order"].compute(scheduler="sync")
        except lo.ConversionError as err:
            print(err)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent),
                                                                           os.environ.get("PYTHONPATH", "")])))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(f"{path}: the file shrank while it was read: it was "), proc.stdout


def audited(paths, log):
    """{path: [(start, stop), ...]} of every read the audit file system logged."""
    reads = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        path, start, stop = line.split()
        reads.setdefault(path, []).append((int(start), int(stop)))
    return reads


def test_each_task_reads_its_own_file_once_and_nothing_else(itch_files, tmp_path):
    folder, paths = itch_files
    log = tmp_path / "reads.log"
    frames = ld.read_stream([f"audit://{p}" for p in paths], "itch50", storage_options={"log": str(log)})
    assert not log.exists()  # building the graph read nothing
    add, trade = dask.compute(frames["add_order"], frames["trade"], scheduler="threads")
    for got, name in [(add, "add_order"), (trade, "trade")]:
        pd.testing.assert_frame_equal(got.reset_index(drop=True), expected(paths, "itch50", name), check_exact=True)
    # each file read once, whole (an empty file: no read at all), by the one task of its partition
    assert audited(paths, log) == {str(p): [(0, p.stat().st_size)] for p in paths if p.stat().st_size}


@pytest.mark.slow
def test_on_a_two_process_local_cluster(itch_files, tmp_path):
    folder, paths = itch_files
    log = tmp_path / "reads.log"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, worker_dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            client.run(sys.path.insert, 0, str(HERE))  # workers unpickle the audit file system from here
            frames = ld.read_stream([f"audit://{p}" for p in paths], "itch50", storage_options={"log": str(log)})
            add, shares = client.compute([frames["add_order"], frames["trade"].shares.sum()], sync=True)
    pd.testing.assert_frame_equal(add.reset_index(drop=True), expected(paths, "itch50", "add_order"),
                                  check_exact=True)
    assert shares == expected(paths, "itch50", "trade").shares.sum()
    assert audited(paths, log) == {str(p): [(0, p.stat().st_size)] for p in paths if p.stat().st_size}
