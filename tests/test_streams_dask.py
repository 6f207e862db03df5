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

from dask_audit import AuditFileSystem  # noqa: E402
from test_streams import ITCH, LAS_LIKE, _packets, _pcap_by_hand, _rdw, _tagged, _tagged_bytes, itch_file, las_like  # noqa: E402

import layouts.dask as ld  # noqa: E402

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


@pytest.mark.slow
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
        (tmp_path / f"vb{i}.dat").write_bytes(
            b"".join(struct.pack(">HH", 4 + sum(map(len, b)), 0) + b"".join(b) for b in blocks)
        )
    vb = sorted(tmp_path.glob("vb*.dat"))
    frames = ld.read_stream(str(tmp_path / "vb*.dat"), S.bdw(rec), types=["record", "_blocks"])
    got = check_frames(frames, vb, S.bdw(rec))
    assert got["_blocks"]["_offset"].tolist() == [0, 46, 0] and str(got["record"]["_prefix"].dtype).startswith(
        "fixed_size_binary[4]"
    )
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


def test_list_lengths_from_each_files_header_are_a_clear_refusal(tmp_path):
    """attack5: segy (samples per trace from the header) failed with an internal message;
    one frame has one schema, these have one per file: a LayoutError that says so."""
    with pytest.raises(lo.LayoutError, match=r"the list length of ibm32.samples comes from each file's header"):
        ld.read_stream(str(tmp_path / "*.sgy"), "segy")


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
    with pytest.raises(
        lo.ConversionError,
        match=rf"^{str(bad)!r}".replace("'", "") + r": byte \d+: the record's "
        r"length field \(byte \d+\) says \d+, a record of \d+ bytes, past the end of the data",
    ):
        frames["add_order"].compute(scheduler="sync")
    # through fsspec (not mapped: the bytes are read, and the message names the file, not <buffer>)
    frames = ld.read_stream([f"audit://{bad}"], "itch50", storage_options={"log": str(tmp_path / "log")})
    with pytest.raises(lo.ConversionError, match=rf"^{bad}: byte \d+: the record's length field"):
        frames["trade"].compute(scheduler="sync")
    (tmp_path / "zero.pcap").write_bytes(b"\0" * 40)
    frames = ld.read_stream(str(tmp_path / "zero.pcap"), "pcap")
    with pytest.raises(
        lo.ConversionError,
        match=rf"^{tmp_path / 'zero.pcap'}: byte 0: magic number 00000000 is "
        r"none of 0xa1b2c3d4",
    ):
        frames["packet"].compute(scheduler="sync")


def test_description_and_argument_errors_come_when_the_graph_is_built(pcap_files, tmp_path):
    folder, paths = pcap_files
    toml = tmp_path / "bad.toml"
    toml.write_text('[[section]]\nframing = { size = "n + 1" }\n[section.types.x]\nfields = [["a", "u1"]]\n')
    with pytest.raises(
        lo.LayoutError,
        match=r"bad.toml: section\[0\].framing.size: 'n \+ 1' names 'n', which is no "
        r"integer field of the header",
    ):
        ld.read_stream(str(folder / "*.pcap"), str(toml))
    with pytest.raises(
        lo.LayoutError,
        match=r"types names 'packets', which is no table of this stream; its record "
        r"types: packet; reserved tables it can have: _header, _gaps",
    ):
        ld.read_stream(str(folder / "*.pcap"), "pcap", types=["packets"])
    with pytest.raises(lo.LayoutError, match=r"types names 'packet' twice"):
        ld.read_stream(str(folder / "*.pcap"), "pcap", types=["packet", "packet"])
    with pytest.raises(
        lo.LayoutError,
        match=r"table 'packet' has a column named 'ts_sec'; pass another "
        r"file_column=",
    ):
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
        read.scan_section = real

        # a byte range of fixed-size records, cut while its task has it mapped
        import layouts._faults as faults
        S = lo.Stream
        spec = S([S.Section(S.Framing(size=6), [S.RecordType("a", S.Record([("k", "S1"), ("v", "<u4"),
                                                                            ("x", "u1")]), "a")], tag=S.Tag(0, 1))])
        ranged = path + ".bin"
        open(ranged, "wb").write(b"a\\1\\0\\0\\0\\7" * 100_000)
        frames = ld.read_stream(ranged, spec, blocksize=60_000)

        class Cut(faults.MappedGuard):
            def __init__(self, address, nbytes):
                os.truncate(ranged, 300_000)
                super().__init__(address, nbytes)

        faults.MappedGuard = Cut
        try:
            frames["a"].partitions[7].compute(scheduler="sync")
        except lo.ConversionError as err:
            print(err)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{path}: the file shrank while it was read: it was "), lines
    assert lines[1].startswith(
        f"{path}.bin shrank while it was being read by Dask: it is now 300,000 bytes, so "
        f"record 50,000 (byte 300,000 of the file) and the ones after it are gone; another "
        f"program truncated or rewrote the file: call layouts.dask.read_stream again"
    ), lines


def audited(paths, log):
    """{path: [(start, stop), ...]} of every read the audit file system logged."""
    reads = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        path, start, stop = line.split()
        reads.setdefault(path, []).append((int(start), int(stop)))
    return reads


@pytest.mark.slow
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
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",  # (a free port: the other cluster test may run at the same time)
        worker_dashboard_address=None,
    ) as cluster:
        with distributed.Client(cluster) as client:
            client.run(sys.path.insert, 0, str(HERE))  # workers unpickle the audit file system from here
            frames = ld.read_stream([f"audit://{p}" for p in paths], "itch50", storage_options={"log": str(log)})
            add, shares = client.compute([frames["add_order"], frames["trade"].shares.sum()], sync=True)
    pd.testing.assert_frame_equal(add.reset_index(drop=True), expected(paths, "itch50", "add_order"), check_exact=True)
    assert shares == expected(paths, "itch50", "trade").shares.sum()
    assert audited(paths, log) == {str(p): [(0, p.stat().st_size)] for p in paths if p.stat().st_size}


# --------------------------------------------------------------------------- byte ranges of fixed-size records
@pytest.fixture(scope="module")
def las_files(tmp_path_factory):
    """Header + bytes between it and the points + fixed-size points (with tails), one file
    with bytes after its points, one with no points."""
    folder = tmp_path_factory.mktemp("las")
    spec = folder / "points.toml"
    spec.write_text(LAS_LIKE)
    paths = []
    for i, (n, after) in enumerate([(50, b""), (7, b""), (0, b""), (23, b"TRAILER")]):
        path = folder / f"p{i}.las"
        path.write_bytes(las_like(n)[0] + after)
        paths.append(path)
    return folder, paths, str(spec)


def test_fixed_size_records_cut_into_byte_ranges(las_files, tmp_path):
    folder, paths, spec = las_files
    log = tmp_path / "reads.log"
    frames = ld.read_stream(
        [f"audit://{p}" for p in paths],
        spec,
        types=["point", "_header", "_gaps"],
        blocksize=200,
        storage_options={"log": str(log)},
    )
    # 20-byte points, 10 a range: 50 -> 5 ranges, 23 -> 3; a file with one range (7, 0 points) is one partition
    assert frames["point"].npartitions == 5 + 1 + 1 + 3
    header_reads = audited(paths, log)  # planning read each file's 16-byte header, nothing more
    assert header_reads == {str(p): [(0, 16)] for p in paths}
    log.unlink()
    got = check_frames(frames, paths, spec)
    assert len(got["point"]) == 80 and len(got["_header"]) == 4
    assert got["_gaps"]._offset.tolist() == [16, 16, 16, 16, 26 + 23 * 20]
    assert got["_gaps"]._tail.iloc[-1] == b"TRAILER"
    # each task read its own range once: [0, first records' end), then ranges of 10 points, the last to the end;
    # and the 16-byte header, to check it is still the one the ranges were cut by
    reads = audited(paths, log)
    p0, p3 = str(paths[0]), str(paths[3])
    assert reads[p0].count((0, 16)) == 5 and reads[p3].count((0, 16)) == 3
    assert sorted(r for r in reads[p0] if r != (0, 16)) == [(0, 226), (226, 426), (426, 626), (626, 826), (826, 1026)]
    assert sorted(r for r in reads[p3] if r != (0, 16)) == [(0, 226), (226, 426), (426, 493)]
    assert reads[str(paths[1])] == [(0, paths[1].stat().st_size)] and reads[str(paths[2])] == [
        (0, paths[2].stat().st_size)
    ]


def test_byte_ranges_of_a_tagged_stream_without_header_and_their_errors(tmp_path):
    spec = S(
        [
            S.Section(
                S.Framing(size=6),
                [
                    S.RecordType("a", S.Record([("k", "S1"), ("v", "<u4")]), "a"),
                    S.RecordType("b", S.Record([("k", "S1"), ("w", "<i4")]), "b"),
                ],
                tag=S.Tag(0, 1),
                tail="column",
            )
        ]
    )
    good = b"".join((b"a" if i % 3 else b"b") + struct.pack("<i", i) + bytes([i % 7]) for i in range(100))
    (tmp_path / "good.bin").write_bytes(good)
    frames = ld.read_stream(str(tmp_path / "good.bin"), spec, blocksize=60)
    assert frames["a"].npartitions == 10
    got = check_frames(frames, [tmp_path / "good.bin"], spec)
    assert got["b"]["w"].tolist() == list(range(0, 100, 3)) and got["a"]["_offset"].tolist()[:2] == [6, 12]
    # an unknown tag in the seventh range: the same message as read_stream of the whole file
    bad = tmp_path / "bad.bin"
    bad.write_bytes(good[: 6 * 65] + b"z" + good[6 * 65 + 1 :])
    with pytest.raises(lo.ConversionError) as whole:
        lo.read_stream(bad, spec)
    frames = ld.read_stream(str(bad), spec, blocksize=60)
    with pytest.raises(
        lo.ConversionError, match=rf"^{bad}: byte 390: record type tag 122 \(b'z'\) at byte 390 "
    ) as err:
        frames["a"].compute(scheduler="sync")
    assert str(err.value) == str(whole.value)
    # a truncated last record: one whole-file partition, read_stream's own error
    (tmp_path / "cut.bin").write_bytes(good[:-2])
    frames = ld.read_stream(str(tmp_path / "cut.bin"), spec, blocksize=60)
    assert frames["a"].npartitions == 1
    with pytest.raises(
        lo.ConversionError,
        match=rf"^{tmp_path / 'cut.bin'}: byte 594: the last record is "
        r"truncated: 4 bytes left, a record is 6 bytes",
    ):
        frames["a"].compute(scheduler="sync")
    # the file cut after the ranges were planned
    frames = ld.read_stream(str(tmp_path / "good.bin"), spec, blocksize=60)
    os.truncate(tmp_path / "good.bin", 300)
    with pytest.raises(
        lo.ConversionError,
        match=rf"^{tmp_path / 'good.bin'} shrank after layouts.dask.read_stream "
        r"planned its byte ranges: it is now 300 bytes, and the range \[300, "
        r"360\) is gone; call layouts.dask.read_stream again",
    ):
        frames["b"].partitions[5].compute(scheduler="sync")


def test_length_framed_streams_are_not_cut(pcap_files):
    folder, paths = pcap_files
    with pytest.raises(
        lo.LayoutError,
        match=r"blocksize= cuts only streams of fixed-size records .* pcap frames "
        r"its records by a length field: where a record starts is known only "
        r"from the ones before it, so each file is one partition: leave "
        r"blocksize out",
    ):
        ld.read_stream(str(folder / "*.pcap"), "pcap", blocksize="1MiB")
    with pytest.raises(lo.LayoutError, match=r"blocksize must be a positive number of bytes"):
        ld.read_stream(str(folder / "*.pcap"), "pcap", blocksize=0)


def test_las_files_whose_header_gives_its_own_size_are_whole_partitions(tmp_path):
    """LAS headers size themselves (header.size): such files are never cut into byte
    ranges, and each partition equals read_stream of its file."""
    laspy = pytest.importorskip("laspy")
    for k in range(2):
        las = laspy.create(point_format=3, file_version="1.2")
        las.X, las.Y, las.Z = np.arange(5) + k, np.arange(5), np.arange(5)
        las.write(str(tmp_path / f"p{k}.las"))
    for blocksize in (None, 100):
        frames = ld.read_stream(str(tmp_path / "p*.las"), "las", types=["format3"], blocksize=blocksize)
        assert frames["format3"].npartitions == 2
        assert frames["format3"].compute()["X"].tolist() == [0, 1, 2, 3, 4, 1, 2, 3, 4, 5]


def _vb_file(path, blocks, seed):
    """A VB file: ``blocks`` blocks of 1..6 RDW records with tails (ids count up)."""
    rng = np.random.default_rng(seed)
    out, rid = [], 0
    for _ in range(blocks):
        recs = []
        for _ in range(int(rng.integers(1, 7))):
            recs.append(_rdw(struct.pack(">I", rid) + b"NAME%02d" % (rid % 100) + b"t" * int(rng.integers(0, 20))))
            rid += 1
        body = b"".join(recs)
        out.append(struct.pack(">HH", 4 + len(body), 0) + body)
    path.write_bytes(b"".join(out))
    return path


def test_vb_files_cut_into_ranges_of_whole_blocks(tmp_path):
    rec = np.dtype([("id", ">u4"), ("name", "S6")])
    spec = S.bdw(rec, tail="column")
    paths = [
        _vb_file(tmp_path / "a.vb", 300, 1),
        _vb_file(tmp_path / "b.vb", 3, 2),
        _vb_file(tmp_path / "c.vb", 120, 3),
    ]
    frames = ld.read_stream(paths, spec, types=["record", "_blocks"], blocksize=2000)
    sizes = [p.stat().st_size for p in paths]
    assert frames["record"].npartitions > 1 + sizes[0] // 2000  # the small file is one partition
    got = check_frames(frames, paths, spec)
    ids = got["record"][got["record"]._file == str(paths[0])].id.tolist()
    assert ids == list(range(len(ids))) and len(ids) > 300  # every record once, in the file's order
    # every range starts at a block descriptor word: the blocks' offsets are the file's
    blocks = got["_blocks"][got["_blocks"]._file == str(paths[0])]._offset.tolist()
    assert blocks[0] == 0 and blocks == sorted(blocks) and len(blocks) == 300
    # BDWs that do not chain to the end: one partition, and read_stream's error when it is computed
    bad = tmp_path / "bad.vb"
    raw = bytearray(paths[0].read_bytes())
    raw[blocks[150] : blocks[150] + 2] = b"\xff\xff"
    bad.write_bytes(bytes(raw))
    frame = ld.read_stream(bad, spec, blocksize=2000)["record"]
    assert frame.npartitions == 1
    with pytest.raises(
        lo.ConversionError,
        match=rf"{bad}: byte {blocks[150]}: block descriptor word says the block "
        r"is 65535 bytes, past the end of the data",
    ):
        frame.compute(scheduler="sync")


def test_several_fixed_size_sections_cut_into_ranges_of_each(tmp_path):
    side = S.Record([("side", "S1"), ("qty", ">u4")])
    spec = S(
        [
            S.Section(
                S.Framing(size=5),
                [S.RecordType("buy", side, tag="B"), S.RecordType("sell", side, tag="S")],
                tag=S.Tag(offset=0, size=1),
                count="n1",
            ),
            S.Section(
                S.Framing(size=8),
                [S.RecordType("price", S.Record([("px", ">i8")]))],
                offset="20 + n1 * 5 + 7",
                count="n2",
            ),
        ],
        header=S.Record([("magic", "S4"), ("n1", ">u8"), ("n2", ">u8")]),
        name="two",
    )

    def write(path, n1, n2):
        recs = b"".join((b"B" if i % 3 else b"S") + struct.pack(">I", i) for i in range(n1))
        prices = b"".join(struct.pack(">q", -i * 1000) for i in range(n2))
        path.write_bytes(b"TWO!" + struct.pack(">QQ", n1, n2) + recs + b"between" + prices + b"the end")
        return path

    paths = [write(tmp_path / "a.two", 300, 90), write(tmp_path / "b.two", 40, 0), write(tmp_path / "c.two", 7, 200)]
    frames = ld.read_stream(paths, spec, types=["buy", "sell", "price", "_header", "_gaps"], blocksize=400)
    # a: 300 records of 5 bytes, 80 a range -> 4; 90 of 8, 50 a range -> 2; b: an empty section, one partition;
    # c: 7 records -> 1, 200 prices -> 4
    assert frames["buy"].npartitions == 6 + 1 + 5
    got = check_frames(frames, paths, spec)
    assert sorted(got["_gaps"]._tail.tolist()) == [b"between"] * 3 + [b"the end"] * 3
    assert len(got["price"]) == 290 and len(got["_header"]) == 3


def test_a_header_rewritten_after_planning_is_an_error_not_stale_ranges(tmp_path):
    """attack5: ranges cut by a header that another program rewrote (same size) read 1000
    records where the header now says 500, without a word."""
    import struct

    import dask

    S = lo.Stream
    side = S.Record([("side", "S1"), ("qty", ">u4")])
    spec = S(
        [S.Section(S.Framing(size=5), [S.RecordType("buy", side, tag="B")], tag=S.Tag(offset=0, size=1), count="n")],
        header=S.Record([("magic", "S8"), ("n", ">u8")]),
    )
    path = tmp_path / "f.dat"
    path.write_bytes(b"ORDERS01" + struct.pack(">Q", 1000) + b"".join(b"B" + struct.pack(">I", i) for i in range(1000)))
    frames = ld.read_stream(str(path), spec, blocksize=1000, types=["buy"])
    assert len(frames["buy"].compute(scheduler="synchronous")) == 1000
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">Q", 500))
    with pytest.raises(lo.ConversionError, match=r"f.dat: its header \(bytes 0 to 16\) changed after"):
        dask.compute(frames["buy"], scheduler="synchronous")
