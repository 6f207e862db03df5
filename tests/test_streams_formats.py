"""Record streams on the formats the language must express, each tested on files written
by its own library: LAS 1.2-1.4 point files (laspy), SEG-Y (segyio) and Databento DBN
(databento-dbn). Values equal the library's reader's; write_stream gives back the file
byte for byte. Also the language parts these formats needed: header.size (fields absent
in older versions), max()/min() in expressions, select (the type from a header field),
framing = "fixed", and lists whose length is a header field."""

import ast
import io
import os
import re
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo

S = lo.Stream


# --------------------------------------------------------------------------- LAS (laspy)
laspy = pytest.importorskip("laspy")


def _las(version, fmt, n=7, extra=False, vlr=False, evlr=False, seed=0):
    """A LAS file written by laspy: (its bytes, laspy's reading of it)."""
    rng = np.random.default_rng(seed)
    las = laspy.create(point_format=fmt, file_version=version)
    if extra:
        las.add_extra_dim(laspy.ExtraBytesParams(name="height", type="f4"))
    las.header.offsets = [1000.0, 2000.0, 10.0]
    las.header.scales = [0.01, 0.01, 0.001]
    las.X = rng.integers(-(2**31), 2**31 - 1, n)
    las.Y = rng.integers(-1000, 1000, n)
    las.Z = rng.integers(0, 10**6, n)
    las.intensity = rng.integers(0, 65535, n)
    las.return_number = rng.integers(1, 6, n)
    las.number_of_returns = rng.integers(1, 6, n)
    las.classification = rng.integers(0, 31, n)
    las.synthetic = rng.integers(0, 2, n).astype(bool)
    las.point_source_id = rng.integers(0, 65535, n)
    names = set(las.point_format.dimension_names)
    if "gps_time" in names:
        las.gps_time = rng.random(n) * 1e6
    if "red" in names:
        las.red, las.green, las.blue = (rng.integers(0, 65535, n) for _ in range(3))
    if "nir" in names:
        las.nir = rng.integers(0, 65535, n)
    if extra:
        las.height = rng.random(n).astype(np.float32)
    if vlr:
        las.vlrs.append(
            laspy.VLR(user_id="layouts", record_id=7, description="a test VLR", record_data=b"projection, say")
        )
    if evlr:
        from laspy.vlrs.vlrlist import VLRList

        las.evlrs = VLRList([laspy.VLR(user_id="layouts", record_id=8, description="an EVLR", record_data=b"x" * 40)])
    bio = io.BytesIO()
    las.write(bio)
    raw = bio.getvalue()
    return raw, laspy.read(io.BytesIO(raw))


LAS_CASES = [
    ("1.2", 0),
    ("1.2", 1),
    ("1.2", 2),
    ("1.2", 3),
    ("1.3", 4),
    ("1.3", 5),
    ("1.4", 0),
    ("1.4", 6),
    ("1.4", 7),
    ("1.4", 8),
    ("1.4", 9),
    ("1.4", 10),
]


@pytest.mark.parametrize("version,fmt", LAS_CASES)
def test_las_points_equal_laspy_and_round_trip(version, fmt):
    raw, las = _las(version, fmt, vlr=True)
    t = lo.read_stream(raw, "las")
    p = t[f"format{fmt}"]
    assert {k for k in t if len(t[k].to_arrow())} == {"_header", f"format{fmt}", "_gaps"}
    assert all(len(t[f"format{f}"].to_arrow()) == 0 for f in range(11) if f != fmt)
    for dim in ("X", "Y", "Z", "intensity", "point_source_id", "user_data"):
        assert p[dim].to_numpy().tolist() == np.asarray(las[dim]).tolist(), dim
    bits = p["bit_fields"].to_numpy()
    if fmt < 6:
        cls = p["raw_classification"].to_numpy()
        assert (cls & 0x1F).tolist() == np.asarray(las.classification).tolist()
        assert ((cls >> 5) & 1).astype(bool).tolist() == np.asarray(las.synthetic).tolist()
        assert (bits & 7).tolist() == np.asarray(las.return_number).tolist()
        assert ((bits >> 3) & 7).tolist() == np.asarray(las.number_of_returns).tolist()
        assert p["scan_angle_rank"].to_numpy().tolist() == np.asarray(las.scan_angle_rank).tolist()
    else:
        assert p["classification"].to_numpy().tolist() == np.asarray(las.classification).tolist()
        assert (p["classification_flags"].to_numpy() & 1).astype(bool).tolist() == np.asarray(las.synthetic).tolist()
        assert (bits & 15).tolist() == np.asarray(las.return_number).tolist()
        assert (bits >> 4).tolist() == np.asarray(las.number_of_returns).tolist()
    names = set(las.point_format.dimension_names)
    for dim in ("gps_time", "red", "green", "blue", "nir", "wavepacket_offset", "x_t"):
        if dim in names:
            assert p[dim].to_numpy().tolist() == np.asarray(las[dim]).tolist(), dim
    h = t["_header"].to_arrow().to_pylist()[0]
    assert h["file_signature"] == "LASF" and (h["version_major"], h["version_minor"]) == (1, int(version[2]))
    assert h["point_data_format_id"] == fmt and h["offset_to_point_data"] == las.header.offset_to_point_data
    assert [h["x_scale"], h["y_scale"], h["z_scale"]] == list(las.header.scales)
    assert [h["x_offset"], h["y_offset"], h["z_offset"]] == list(las.header.offsets)
    # the header's fields are those of its version: 1.2 has no waveform start, 1.3 no 64-bit count
    assert ("start_of_waveform_data" in h) == (version != "1.2")
    assert ("point_count" in h) == (version == "1.4")
    if version == "1.4":
        assert h["point_count"] == 7
        assert h["points_by_return"] == [int(v) for v in las.header.number_of_points_by_return]
    # the VLR lies between the header and the points, in _gaps
    gaps = t["_gaps"].to_arrow().to_pylist()
    assert gaps[0]["_offset"] == h["header_size"] and b"projection, say" in gaps[0]["_tail"]
    assert lo.write_stream(t, "las") == raw


def test_las_extra_bytes_are_the_tail_and_evlrs_the_gaps():
    raw, las = _las("1.4", 7, n=9, extra=True, vlr=True, evlr=True)
    t = lo.read_stream(raw, "las")
    p = t["format7"].to_arrow()
    assert p.schema.field("_tail").type == pa.binary()
    heights = np.frombuffer(b"".join(p.column("_tail").to_pylist()), "<f4")
    assert heights.tolist() == np.asarray(las.height).tolist()
    h = t["_header"].to_arrow().to_pylist()[0]
    assert h["point_data_record_length"] == 36 + 4 and h["number_of_evlrs"] == 1
    gaps = t["_gaps"].to_arrow().to_pylist()
    assert [g["_offset"] for g in gaps] == [375, h["start_of_first_evlr"]]
    assert gaps[1]["_tail"].endswith(b"x" * 40)
    assert lo.write_stream(t, "las") == raw


def test_las_changed_values_and_fewer_points_read_back_in_laspy(tmp_path):
    raw, las = _las("1.4", 6, n=10, vlr=True)
    t = lo.read_stream(raw, "las")
    points = t["format6"].to_arrow()
    points = points.set_column(
        points.column_names.index("intensity"), "intensity", pa.array(np.arange(10, dtype=np.uint16) * 3)
    )
    header = t["_header"].to_arrow()
    header = header.set_column(header.column_names.index("point_count"), "point_count", pa.array([4], pa.uint64()))
    t2 = dict(t, format6=points.slice(3, 4), _header=header)
    lo.write_stream(t2, "las", tmp_path / "fewer.las")
    back = laspy.read(tmp_path / "fewer.las")
    assert back.intensity.tolist() == [9, 12, 15, 18]
    assert back.X.tolist() == las.X[3:7].tolist()
    with pytest.raises(
        lo.ConversionError,
        match=r"the header's count = 'max\(legacy_point_count, point_count\)' is "
        r"10, but the tables hold 4 records; set the header field to 4",
    ):
        lo.write_stream(dict(t, format6=points.slice(3, 4)), "las")


def _set(raw, at, fmt, value):
    b = bytearray(raw)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def test_las_damaged_headers_are_errors_naming_the_field():
    raw, _ = _las("1.2", 1)
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: 50 bytes, shorter than the 96 bytes of a las header "
        r"that give its size",
    ):
        lo.read_stream(raw[:50], "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"header.size = 'header_size' is 231, which cuts field "
        r"'start_of_waveform_data' \(bytes 227..235\)",
    ):
        lo.read_stream(_set(raw, 94, "<H", 231), "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"header.size = 'header_size' is 20, less than the 96 bytes "
        r"holding the fields it is computed from",
    ):
        lo.read_stream(_set(raw, 94, "<H", 20), "las")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: 227 bytes, shorter than its 375-byte header"):
        lo.read_stream(_set(raw, 94, "<H", 375)[:227], "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"las section\[0\]: offset = 'offset_to_point_data' is 4000000000, "
        r"outside the file",
    ):
        lo.read_stream(_set(raw, 96, "<I", 4_000_000_000), "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"las section\[0\]: select = 'point_data_format_id' is 131, no type "
        r"of the section \(types: format0=0, .*\); the header is damaged, or "
        r"the file uses a kind of record the description lacks",
    ):
        lo.read_stream(_set(raw, 104, "B", 131), "las")  # a LAZ (compressed) file sets bit 7
    with pytest.raises(
        lo.ConversionError,
        match=r"count = 'max\(legacy_point_count, point_count\)' is 4294967295, "
        r"more records than the 196 bytes from byte 227 can hold",
    ):
        lo.read_stream(_set(raw, 107, "<I", 2**32 - 1), "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"count = 'max\(legacy_point_count, point_count\)' is 7, more "
        r"records than the 195 bytes from byte 227 can hold",
    ):
        lo.read_stream(raw[:-1], "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"framing.size = 'point_data_record_length' is 0; fixed records "
        r"need a size >= 1",
    ):
        lo.read_stream(_set(raw, 105, "<H", 0), "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"type 'format1' record of 20 bytes, shorter than the type's 28 "
        r"bytes of fields",
    ):
        lo.read_stream(_set(raw, 105, "<H", 20), "las")


def test_las_write_refuses_what_the_header_contradicts():
    raw, _ = _las("1.2", 3)
    t = lo.read_stream(raw, "las")
    header = t["_header"].to_arrow().append_column("point_count", pa.array([7], pa.uint64()))
    with pytest.raises(
        lo.ConversionError,
        match=r"'_header' has column 'point_count', a field past the header's "
        r"size = 'header_size' \(227 bytes\); drop the column",
    ):
        lo.write_stream(dict(t, _header=header), "las")
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'format3' has 7 records, but the header's select = "
        r"'point_data_format_id' chooses type 'format2'",
    ):
        h = t["_header"].to_arrow()
        h = h.set_column(
            h.column_names.index("point_data_format_id"), "point_data_format_id", pa.array([2], pa.uint8())
        )
        lo.write_stream(dict(t, _header=h), "las")


# --------------------------------------------------------------------------- SEG-Y (segyio)
segyio = pytest.importorskip("segyio")

SAMPLES = {1: np.float32, 2: np.int32, 3: np.int16, 5: np.float32, 8: np.int8}
TYPE_OF = {1: "ibm32", 2: "int32", 3: "int16", 5: "float32", 8: "int8"}


def _segy(path, fmt, ilines=(1, 2, 3), xlines=(10, 11, 12, 13), ns=25, ext_headers=0):
    """A SEG-Y file written by segyio.create: its bytes and the samples written."""
    spec = segyio.spec()
    spec.ilines, spec.xlines, spec.samples = list(ilines), list(xlines), list(range(ns))
    spec.format, spec.sorting = fmt, 2
    spec.ext_headers = ext_headers
    rng = np.random.default_rng(fmt)
    data = []
    with segyio.create(path, spec) as f:
        k = 0
        for il in ilines:
            for xl in xlines:
                f.header[k] = {
                    segyio.su.iline: il,
                    segyio.su.xline: xl,
                    segyio.su.offset: 7 * k - 20,
                    segyio.su.cdpx: 1000 + k,
                    segyio.su.tracf: k + 1,
                }
                if SAMPLES[fmt] == np.float32:
                    trace = (rng.standard_normal(ns) * 100).astype(np.float32)
                else:
                    info = np.iinfo(SAMPLES[fmt])
                    trace = rng.integers(info.min, info.max, ns, endpoint=True).astype(SAMPLES[fmt])
                f.trace[k] = trace
                data.append(trace)
                k += 1
        if ext_headers:
            f.text[1] = b"C 1 an extended textual header".ljust(3200)
    with open(path, "rb") as fh:
        return fh.read()


def _ibm_to_float(bits):
    """IBM System/360 single precision floats (uint32) as float64, exactly."""
    bits = bits.astype(np.uint64)
    sign = np.where(bits >> np.uint64(31), -1.0, 1.0)
    exp = ((bits >> np.uint64(24)) & np.uint64(0x7F)).astype(np.int64) - 64
    mant = (bits & np.uint64(0xFFFFFF)).astype(np.float64) / 2.0**24
    return sign * mant * np.power(16.0, exp)


@pytest.mark.parametrize("fmt", [1, 2, 3, 5, 8])
def test_segy_traces_equal_segyio_and_round_trip(tmp_path, fmt):
    path = tmp_path / f"f{fmt}.sgy"
    raw = _segy(path, fmt)
    t = lo.read_stream(path, "segy")
    name = TYPE_OF[fmt]
    assert {k for k in t if len(t[k].to_arrow())} == {"_header", name}
    tr = t[name].to_arrow()
    assert tr.num_rows == 12 and tr.column("_offset").to_pylist() == [
        3600 + k * (240 + 25 * tr.schema.field("samples").type.value_type.bit_width // 8) for k in range(12)
    ]
    assert tr.schema.field("samples").type.list_size == 25
    h = t["_header"].to_arrow().to_pylist()[0]
    with segyio.open(path, ignore_geometry=True) as f:
        assert (h["samples_per_trace"], h["sample_format"]) == (f.bin[segyio.su.hns], f.bin[segyio.su.format])
        # the textual header is the file's bytes (EBCDIC here); segyio gives it as ASCII
        assert h["textual_header"] == raw[:3200]
        assert h["textual_header"].decode("cp037")[:800] == bytes(f.text[0])[:800].decode("ascii")
        for col, key in [
            ("inline_3d", segyio.su.iline),
            ("crossline_3d", segyio.su.xline),
            ("offset", segyio.su.offset),
            ("cdp_x", segyio.su.cdpx),
            ("trace_number", segyio.su.tracf),
            ("trace_sample_count", segyio.su.ns),
        ]:
            assert tr.column(col).to_pylist() == [f.header[k][key] for k in range(f.tracecount)], col
        samples = np.stack(tr.column("samples").to_numpy(zero_copy_only=False))
        if fmt == 1:  # IBM floats stay their raw bits; decoded they are segyio's floats
            assert samples.dtype == np.uint32
            assert np.array_equal(_ibm_to_float(samples).astype(np.float32), f.trace.raw[:])
        else:
            assert samples.dtype == SAMPLES[fmt] and np.array_equal(samples, f.trace.raw[:])
    assert lo.write_stream(t, "segy") == raw


def test_segy_extended_headers_changed_samples_and_the_write_back(tmp_path):
    raw = _segy(tmp_path / "ext.sgy", 5, ext_headers=1)
    t = lo.read_stream(raw, "segy")
    assert t["_header"].to_arrow().column("extended_textual_headers").to_pylist() == [1]
    gaps = t["_gaps"].to_arrow().to_pylist()
    assert gaps == [{"_offset": 3600, "_tail": raw[3600:6800]}]
    assert gaps[0]["_tail"].decode("cp037").startswith("C 1 an extended")
    assert t["float32"].to_arrow().column("_offset").to_pylist()[0] == 6800
    assert lo.write_stream(t, "segy") == raw
    tr = t["float32"].to_arrow()
    new = np.arange(12 * 25, dtype=np.float32).reshape(12, 25)
    tr = tr.set_column(
        tr.column_names.index("samples"), "samples", pa.FixedSizeListArray.from_arrays(pa.array(new.ravel()), 25)
    )
    lo.write_stream(dict(t, float32=tr.slice(2, 5)), "segy", tmp_path / "new.sgy")
    with segyio.open(tmp_path / "new.sgy", ignore_geometry=True) as f:
        assert f.tracecount == 5 and np.array_equal(f.trace.raw[:], new[2:7])
    with pytest.raises(
        lo.ConversionError,
        match=r"the parts of the stream overlap at byte 3500 \(one ends at 3600, "
        r"the next starts at 3500\)",
    ):
        lo.write_stream(
            {k: v for k, v in t.items() if k != "_gaps"}
            | {"_gaps": pa.table({"_offset": pa.array([3500], pa.int64()), "_tail": pa.array([b"x" * 3300])})},
            "segy",
        )


def test_segy_larger_than_a_window_through_the_command(tmp_path):
    """attack8: every window after the first counted its traces without the header's
    samples per trace (a KeyError for any SEG-Y file over 16 MB); here windows of 2 KB."""
    from layouts._stream import files as F
    from layouts._stream.read import resolve

    raw = _segy(tmp_path / "w.sgy", 5, ilines=range(1, 6), xlines=range(10, 16), ns=100)
    stream, whole = resolve("segy"), lo.read_stream(raw, "segy")
    written, order, counts = F.convert_to_dir(raw, stream, str(tmp_path / "d"), "parquet", window=2048)
    assert counts == F.table_bytes(stream, whole, whole.order) and counts["float32"] == (30, 30 * 640)
    assert F.count_stream(raw, stream, window=2048)[2] == counts
    tables, order, _ = F.read_dir(str(tmp_path / "d"), stream)
    assert lo.write_stream(tables, stream, order=order) == raw
    back = tmp_path / "back.sgy"
    assert F.write_back(F.scan_dir(str(tmp_path / "d"), stream), stream, str(back), order=order, window=2048) == 30
    assert back.read_bytes() == raw


def test_segy_damaged_binary_headers_are_errors(tmp_path):
    raw = _segy(tmp_path / "d.sgy", 5)
    with pytest.raises(
        lo.ConversionError,
        match=r"segy section\[0\]: select = 'sample_format' is 4, no type of the "
        r"section \(types: ibm32=1, int32=2",
    ):
        lo.read_stream(_set(raw, 3224, ">h", 4), "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: segy section\[0\].types.ibm32.fields.samples: the list "
        r"length 'samples_per_trace' is 0; a list needs at least 1 element",
    ):
        lo.read_stream(_set(raw, 3220, ">H", 0), "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: segy section\[0\].types.ibm32.fields.samples: the list "
        r"length 'samples_per_trace' is 65535, more elements than the 7680 "
        r"bytes of the data can hold",
    ):
        lo.read_stream(_set(raw, 3220, ">H", 65535), "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 3600: the last record is truncated: 4080 bytes left, "
        r"a record is 4240 bytes \(segy section\[0\]\)",
    ):
        lo.read_stream(_set(raw, 3220, ">H", 1000), "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 4280: the last record is truncated: 300 bytes left, "
        r"a record is 340 bytes",
    ):
        lo.read_stream(raw[:4580], "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"offset = '3600 \+ 3200 \* extended_textual_headers' is 400, inside "
        r"the part before it \(which ends at byte 3600\)",
    ):
        lo.read_stream(_set(raw, 3504, ">h", -1), "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"offset = '3600 \+ 3200 \* extended_textual_headers' is 104851600, "
        r"outside the file",
    ):
        lo.read_stream(_set(raw, 3504, ">h", 32765), "segy")
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: 3000 bytes, shorter than the 3600-byte header of a segy "
        r"stream",
    ):
        lo.read_stream(raw[:3000], "segy")


# --------------------------------------------------------------------------- DBN (databento-dbn)
dbn = pytest.importorskip("databento_dbn")

DBN_TYPES = {
    "trades": "TradeMsg",
    "mbp1": "MBP1Msg",
    "mbp10": "MBP10Msg",
    "status": "StatusMsg",
    "imbalance": "ImbalanceMsg",
    "statistics": "StatMsg",
    "ohlcv_1s": "OHLCVMsg",
    "ohlcv_1m": "OHLCVMsg",
    "ohlcv_1h": "OHLCVMsg",
    "ohlcv_1d": "OHLCVMsg",
    "ohlcv_eod": "OHLCVMsg",
    "mbo": "MBOMsg",
    "cmbp1": "CMBP1Msg",
    "cbbo_1s": "CBBOMsg",
    "cbbo_1m": "CBBOMsg",
    "bbo_1s": "BBOMsg",
    "bbo_1m": "BBOMsg",
}


def test_dbn_types_are_the_packages_record_layouts():
    """Each type of the built-in is its databento-dbn class's layout (its _dtypes, less
    the length byte the framing owns), with 9 implied decimals on its price fields."""
    spec = lo.Stream.builtin("dbn")
    types = {t.name: t for t in spec.sections[1].types}
    assert set(types) == set(DBN_TYPES)
    for name, cls in DBN_TYPES.items():
        k = getattr(dbn, cls)
        want = [(n.lstrip("_"), t if t[0] == "S" or t[1] == "1" else "<" + t) for n, t in k._dtypes if n != "length"]
        assert list(types[name].record.fields) == want, name
        assert 1 + types[name].record.size("little") == k.size_hint, name
        assert dict(types[name].record.decimals) == {p: 9 for p in k._price_fields}, name
        rtype = {
            "trades": "MBP_0",
            "mbp1": "MBP_1",
            "mbp10": "MBP_10",
            "imbalance": "IMBALANCE",
            "cmbp1": "CMBP_1",
            "statistics": "STATISTICS",
        }.get(name, name.upper())
        assert types[name].tag == int(getattr(dbn.RType, rtype)), name


def _dbn_records(ts_out=False):
    D = dbn
    out = ts_out and {"ts_out": 1_700_000_000_000_000_999} or {}
    side = [D.Side.BID, D.Side.ASK, D.Side.NONE]
    recs = []
    for i in range(6):
        recs.append(
            D.MBOMsg(
                publisher_id=1,
                instrument_id=100 + i,
                ts_event=1_700_000_000_000_000_000 + i,
                order_id=2**63 + i,
                price=-5 * 10**9 + i,
                size=i + 1,
                action=D.Action.ADD,
                side=side[i % 3],
                ts_recv=1_700_000_000_000_000_100 + i,
                flags=128,
                channel_id=i,
                ts_in_delta=-i,
                sequence=2**32 - 1 - i,
                **out,
            )
        )
        recs.append(
            D.TradeMsg(
                publisher_id=2,
                instrument_id=7,
                ts_event=10 + i,
                price=123_450_000_000 + i,
                size=100 * i,
                action=D.Action.TRADE,
                side=side[i % 3],
                flags=0,
                depth=0,
                ts_recv=11 + i,
                ts_in_delta=5,
                sequence=i,
                **out,
            )
        )
        if i % 2:
            recs.append(
                D.OHLCVMsg(
                    rtype=D.RType.OHLCV_1S if i % 3 else D.RType.OHLCV_1M,
                    publisher_id=1,
                    instrument_id=2,
                    ts_event=40 + i,
                    open=1,
                    high=5 + i,
                    low=-1,
                    close=3,
                    volume=2**64 - 1 - i,
                    **out,
                )
            )
            recs.append(
                D.MBP1Msg(
                    publisher_id=3,
                    instrument_id=4,
                    ts_event=50 + i,
                    price=10**9,
                    size=1,
                    action=D.Action.CANCEL,
                    side=D.Side.ASK,
                    flags=2,
                    depth=0,
                    ts_recv=51,
                    ts_in_delta=0,
                    sequence=i,
                    levels=D.BidAskPair(bid_px=99 * 10**9, ask_px=101 * 10**9, bid_sz=3, ask_sz=4, bid_ct=1, ask_ct=2),
                    **out,
                )
            )
        if i == 2:
            recs.append(
                D.StatMsg(
                    publisher_id=1,
                    instrument_id=2,
                    ts_event=60,
                    ts_recv=61,
                    ts_ref=62,
                    price=7 * 10**9,
                    quantity=-(2**40),
                    stat_type=D.StatType.OPENING_PRICE,
                    **out,
                )
            )
            recs.append(D.ErrorMsg(ts_event=70, err="a rtype the built-in leaves to _unknown", **out))
    return recs


def _dbn_file(recs, ts_out=False):
    m = dbn.Metadata(
        dataset="XNAS.ITCH",
        start=1_700_000_000_000_000_000,
        stype_in=dbn.SType.RAW_SYMBOL,
        stype_out=dbn.SType.INSTRUMENT_ID,
        schema=None,
        symbols=["AAPL", "MSFT"],
        end=1_700_000_100_000_000_000,
        ts_out=ts_out,
    )
    return bytes(m) + b"".join(bytes(r) for r in recs)


def _decoded(raw, ts_out=False):
    dec = dbn.DBNDecoder(ts_out=ts_out)
    dec.write(raw)
    return dec.decode()


def _as_value(v):
    if isinstance(getattr(v, "value", None), str):  # the c_char enums (Action, Side)
        return v.value.encode()
    if isinstance(v, str):  # c_char fields
        return v.encode()
    return int(v) if not isinstance(v, float) else v


@pytest.mark.parametrize("ts_out", [False, True])
def test_dbn_records_equal_the_decoder_and_round_trip(ts_out):
    raw = _dbn_file(_dbn_records(ts_out), ts_out)
    t = lo.read_stream(raw, "dbn")
    decoded = _decoded(raw, ts_out)
    meta, records = decoded[0], decoded[1:]
    h = t["_header"].to_arrow().to_pylist()[0]
    assert (h["magic"], h["version"]) == ("DBN", meta.version) and h["metadata_length"] == len(bytes(meta)) - 8
    m = t["metadata"].to_arrow().to_pylist()[0]
    assert m["dataset"].rstrip(b"\0").decode() == meta.dataset and (m["start"], m["end"]) == (meta.start, meta.end)
    assert b"AAPL" in m["_tail"] and m["schema"] == 0xFFFF  # mixed schemas
    by_offset = {}
    for name in DBN_TYPES:
        table = t[name].to_arrow()
        for row in table.to_pylist():
            by_offset[row["_offset"]] = (name, row)
    offset = 8 + h["metadata_length"]
    unknown = t["_unknown"].to_arrow().to_pylist()
    for rec in records:
        size = len(bytes(rec))
        if isinstance(rec, dbn.ErrorMsg):  # not described: kept whole
            assert unknown == [{"_offset": offset, "_tail": bytes(rec)}]
            offset += size
            continue
        name, row = by_offset[offset]
        assert type(rec).__name__ == DBN_TYPES[name]
        for field in row:
            if field in ("_offset", "_tail") or field.startswith("reserved"):
                continue
            level = re.fullmatch(r"((?:bid|ask)_(?:px|sz|ct))_(\d\d)", field)
            value = getattr(rec.levels[int(level[2])], level[1]) if level else getattr(rec, field)
            assert row[field] == _as_value(value), (name, field)
        assert row["_tail"] == (struct.pack("<Q", rec.ts_out) if ts_out else b"")
        offset += size
    assert offset == len(raw) and len(by_offset) == len(records) - 1
    assert t.decimals["mbo"] == {"price": 9}
    assert t.decimal("mbo", "price").to_pylist()[0] == __import__("decimal").Decimal("-5.000000000")
    assert lo.write_stream(t, "dbn") == raw


def test_dbn_changed_prices_and_fewer_records_read_back_in_the_decoder():
    raw = _dbn_file(_dbn_records())
    t = lo.read_stream(raw, "dbn")
    mbo = t["mbo"].to_arrow()
    mbo = mbo.set_column(mbo.column_names.index("price"), "price", pa.array(np.arange(6, dtype=np.int64) * 10**9))
    out = lo.write_stream(dict(t, mbo=mbo.slice(1, 3), trades=t["trades"].to_arrow().slice(0, 0)), "dbn")
    recs = _decoded(out)[1:]
    assert [r.price for r in recs if isinstance(r, dbn.MBOMsg)] == [10**9, 2 * 10**9, 3 * 10**9]
    assert not [r for r in recs if isinstance(r, dbn.TradeMsg)]
    assert len(recs) == 3 + 3 + 3 + 1 + 1  # mbo, ohlcv, mbp1, statistics, the error kept in _unknown


def test_dbn_damaged_streams_are_errors_naming_the_byte():
    raw = _dbn_file(_dbn_records()[:3])
    meta = 8 + struct.unpack_from("<I", raw, 4)[0]
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {meta}: the record's length field \(byte {meta}\) "
        rf"says 0, a record of 0 bytes, less than the 2 bytes its framing "
        rf"needs",
    ):
        lo.read_stream(_set(raw, meta, "B", 0), "dbn")
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {meta}: the record's length field \(byte {meta}\) "
        rf"says 255, a record of 1020 bytes, past the end of the data",
    ):
        lo.read_stream(_set(raw, meta, "B", 255), "dbn")
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {meta + 56}: a dbn section\[1\] type 'trades' "
        rf"record of 44 bytes, shorter than the type's 48 bytes of fields",
    ):
        lo.read_stream(_set(raw, meta + 56, "B", 11), "dbn")
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {len(raw) - 56}: the record's length field "
        rf"\(byte {len(raw) - 56}\) says 14, a record of 56 bytes, past the "
        rf"end of the data \(55 bytes left\)",
    ):
        lo.read_stream(raw[:-1], "dbn")
    with pytest.raises(
        lo.ConversionError,
        match=r"dbn section\[0\]: count = 1 is 1, more records than the \d+ bytes "
        r"from byte 8 can hold; the header is damaged",
    ):
        lo.read_stream(_set(raw, 4, "<I", 2**32 - 1), "dbn")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: 5 bytes, shorter than the 8-byte header of a dbn stream"):
        lo.read_stream(raw[:5], "dbn")
    # an rtype no type describes is kept whole, as _unknown (the built-in's unknown = "keep")
    t = lo.read_stream(_set(raw, meta + 1, "B", 0x7F), "dbn")
    assert t["_unknown"].to_arrow().to_pylist() == [
        {"_offset": meta, "_tail": _set(raw, meta + 1, "B", 0x7F)[meta : meta + 56]}
    ]
    assert lo.write_stream(t, "dbn") == _set(raw, meta + 1, "B", 0x7F)


# --------------------------------------------------------------------------- the language parts
def _tiny(kind=2, n=3, records=2, select=True):
    """A header (kind, n), then records of the type ``kind`` selects, each a u2 id and n
    samples (f4 for kind 2, i2 for kind 3)."""
    body = b""
    for r in range(records):
        body += struct.pack("<H", r) + (
            struct.pack(f"<{n}f", *range(n)) if kind == 2 else struct.pack(f"<{n}h", *range(-n, 0))
        )
    return struct.pack("<BH", kind, n) + body


def _tiny_spec():
    return S(
        [
            S.Section(
                S.Framing(),
                [
                    S.RecordType("f4", S.Record([("id", "<u2"), ("v", "<f4[n]")]), tag=2),
                    S.RecordType("i2", S.Record([("id", "<u2"), ("v", "<i2[n]")]), tag=3),
                ],
                select="kind",
            )
        ],
        header=S.Record([("kind", "u1"), ("n", "<u2")]),
        order="little",
        name="tiny",
    )


def test_select_fixed_framing_and_header_sized_lists_in_python():
    spec = _tiny_spec()
    for kind in (2, 3):
        raw = _tiny(kind)
        t = lo.read_stream(raw, spec)
        name = {2: "f4", 3: "i2"}[kind]
        other = {2: "i2", 3: "f4"}[kind]
        a = t[name].to_arrow()
        assert a.schema.field("v").type.list_size == 3 and len(t[other].to_arrow()) == 0
        assert a.column("v").to_pylist() == ([[0.0, 1.0, 2.0]] * 2 if kind == 2 else [[-3, -2, -1]] * 2)
        assert a.column("_offset").to_pylist() == [3, 3 + a.schema.field("v").type.value_type.bit_width // 8 * 3 + 2]
        assert lo.write_stream(t, spec) == raw
    h = t["_header"].to_arrow()
    h = h.set_column(h.column_names.index("n"), "n", pa.array([4], pa.uint16()))
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'i2': column 'v' holds lists of 3; the field is a sub-array "
        r"of 4; its lists \(v <i2\[4\]\) have the lengths the header gives: "
        r"set the header field to the lists' length",
    ):
        lo.write_stream(dict(t, _header=h), spec)
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: tiny section\[0\]: select = 'kind' is 9, no type of the "
        r"section \(types: f4=2, i2=3\)",
    ):
        lo.read_stream(b"\x09" + _tiny()[1:], spec)
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 17: the last record is truncated: 13 bytes left, a "
        r"record is 14 bytes \(tiny section\[0\]\)",
    ):
        lo.read_stream(_tiny()[:-1], spec)


def test_max_min_in_expressions():
    from layouts._stream.spec import check_expr, evaluate

    assert evaluate(check_expr("max(a, b) + min(a, b, 1)", "x", ("a", "b")), {"a": 3, "b": 9}, "x") == 10
    with pytest.raises(
        lo.LayoutError,
        match=r"x: 'max\(a\)' calls max\(\) with fewer than 2 arguments; write max\(a, b, \.\.\.\)",
    ):
        check_expr("max(a)", "x", ("a",))
    with pytest.raises(lo.LayoutError, match=r"x: 'abs\(a, a\)' uses Call abs\(\)"):
        check_expr("abs(a, a)", "x", ("a",))
    with pytest.raises(lo.LayoutError, match=r"x: 'max\(a, c\)' names 'c', which is no integer field of the header"):
        check_expr("max(a, c)", "x", ("a",))


@pytest.mark.parametrize(
    "make,match",
    [
        (
            lambda: S([S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", "S4[3]")]))])]),
            r"section\[0\].types.a.fields.v: 'S4\[3\]': a list holds numbers of 1, 2, 4 or 8 bytes",
        ),
        (
            lambda: S(
                [S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", "?[k]")]))])], header=S.Record([("k", "u1")])
            ),
            r"section\[0\].types.a.fields.v: '\?\[k\]': a list holds numbers of 1, 2, 4 or 8 bytes \('>f4\[n\]', "
            r"'<u4\[5\]'\), not '\?'",
        ),
        (
            lambda: S([S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", ">u6[2]")]))])]),
            r"'>u6\[2\]': a list holds numbers of 1, 2, 4 or 8 bytes \('>f4\[n\]', '<u4\[5\]'\), not '>u6'",
        ),
        (
            lambda: S([S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", ">f4[0]")]))])]),
            r"'>f4\[0\]': a list needs at least 1 element",
        ),
        (
            lambda: S([S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", ">f4[n]")]))])]),
            r"types.a.fields.v: list length: 'n' names 'n', which is no integer field of the header \(integer header "
            r"fields: none\)",
        ),
        (
            lambda: S(
                [S.Section(S.Framing(size=4), [S.RecordType("a", S.Record([("v", ">u4")]))])],
                header=S.Record([("n", "u1"), ("v", ">f4[n]")]),
            ),
            r"header.fields.v: list length: 'n' names 'n', which is no integer field of the header",
        ),
        (
            lambda: S(
                [
                    S.Section(
                        S.Framing(),
                        [
                            S.RecordType("a", S.Record([("v", "u1")]), tag=1),
                            S.RecordType("b", S.Record([("v", "u1")]), tag=2),
                        ],
                        tag=S.Tag(0, 1),
                        select="k",
                    )
                ],
                header=S.Record([("k", "u1")]),
            ),
            r"section\[0\].select: a section's type comes from a tag in each record or from the header \(select\), not both",
        ),
        (
            lambda: S(
                [
                    S.Section(
                        S.Framing(),
                        [
                            S.RecordType("a", S.Record([("v", "u1")]), tag=1),
                            S.RecordType("b", S.Record([("v", "u1")]), tag=2),
                        ],
                        tag=S.Tag(0, 1),
                    )
                ]
            ),
            r"section\[0\].framing: \"fixed\" \(each record its type's fields\) needs one record type or select = "
            r"\"<header field>\" choosing one; this section has 2 types",
        ),
        (
            lambda: S(
                [S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", "u1")]), tag="A")], select="k")],
                header=S.Record([("k", "u1")]),
            ),
            r"types.a: the section selects its type by the header's 'k': give this type the value that selects it, tag = "
            r"<integer >= 0> \(got 'A'\)",
        ),
        (
            lambda: S(
                [
                    S.Section(
                        S.Framing(),
                        [
                            S.RecordType("a", S.Record([("v", "u1")]), tag=1),
                            S.RecordType("b", S.Record([("v", "u1")]), tag=1),
                        ],
                        select="k",
                    )
                ],
                header=S.Record([("k", "u1")]),
            ),
            r"types.b: tag 1 is also 'a''s; each type needs its own",
        ),
        (
            lambda: S([S.Section(S.Framing(size=1), [S.RecordType("a", S.Record([("v", "u1")]))])], header_size="n"),
            r"header.size: there is no header: give \[header\] fields, or drop size",
        ),
        (
            lambda: S(
                [S.Section(S.Framing(size=1), [S.RecordType("a", S.Record([("v", "u1")]))])],
                header=S.Record([("k", "u1")]),
                header_size="m",
            ),
            r"header.size: 'm' names 'm', which is no integer field of the header \(integer header fields: k\)",
        ),
        (
            lambda: S(
                [S.Section(S.Framing(size=1), [S.RecordType("a", S.Record([("v", "u1")]))], select="z")],
                header=S.Record([("k", "u1")]),
            ),
            r"section\[0\].select: 'z' names 'z', which is no integer field of the header",
        ),
    ],
)
def test_new_description_errors_name_the_key_and_the_fix(make, match):
    with pytest.raises(lo.LayoutError, match=match):
        make()


def test_toml_header_size_select_fixed_and_lists(tmp_path):
    doc = """
name = "tiny"
order = "little"
[header]
size = "hsize"
fields = [["kind", "u1"], ["n", "<u2"], ["hsize", "u1"], ["later", "<u4"]]
[[section]]
offset = "hsize"
select = "kind"
framing = "fixed"
[section.types.f4]
tag = 2
fields = [["id", "<u2"], ["v", "<f4[n]"]]
[section.types.i2]
tag = 3
fields = [["id", "<u2"], ["v", "<i2[n]"]]
"""
    (tmp_path / "tiny.toml").write_text(doc)
    old = _tiny(3)[:3] + b"\x04" + _tiny(3)[3:]  # hsize 4: no 'later'
    new = _tiny(2)[:3] + b"\x08" + struct.pack("<I", 77) + _tiny(2)[3:]
    for raw in (old, new):
        t = lo.read_stream(raw, str(tmp_path / "tiny.toml"))
        assert ("later" in t["_header"].to_arrow().column_names) == (raw is new)
        assert lo.write_stream(t, str(tmp_path / "tiny.toml")) == raw
    (tmp_path / "bad.toml").write_text(doc.replace("[section.types.f4]\n", "[section.types.f4]\nsize = 3\n"))
    with pytest.raises(
        lo.LayoutError,
        match=r"bad.toml: section\[0\].types.f4: unknown key 'size'; the keys here are "
        r"about, decimals, fields, tag, text",
    ):
        lo.Stream.load(tmp_path / "bad.toml")
    (tmp_path / "bad.toml").write_text(doc.replace('framing = "fixed"', 'framing = "fix"'))
    with pytest.raises(lo.LayoutError, match=r"section\[0\].framing: 'fix' is no preset; presets are rdw, bdw, fixed"):
        lo.Stream.load(tmp_path / "bad.toml")


def test_list_lengths_from_hostile_headers():
    spec = S(
        [S.Section(S.Framing(), [S.RecordType("a", S.Record([("v", "<f4[n * n * n]")]))])],
        header=S.Record([("n", "<u4")]),
        order="little",
        name="cube",
    )
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: cube section\[0\].types.a.fields.v: list length = "
        r"'n \* n \* n' overflows int64",
    ):
        lo.read_stream(struct.pack("<I", 2**31) + b"\0" * 8, spec)
    with pytest.raises(
        lo.ConversionError,
        match=r"the list length 'n \* n \* n' is 8, more elements than the 7 bytes "
        r"of the data can hold",
    ):
        lo.read_stream(struct.pack("<I", 2) + b"\0" * 3, spec)
    raw = struct.pack("<I", 1) + struct.pack("<f", 1.5) * 2
    t = lo.read_stream(raw, spec)
    assert t["a"].to_arrow().column("v").to_pylist() == [[1.5], [1.5]] and lo.write_stream(t, spec) == raw


# --------------------------------------------------------------------------- mutated files
FUZZ_CHILD = textwrap.dedent(r"""
    import sys, tempfile, os
    import numpy as np
    import layouts as lo
    sys.path.insert(0, {here!r})
    from test_streams_formats import _las, _segy, _dbn_file, _dbn_records

    def mutate(raw, rng, hot):
        b = bytearray(raw)
        # half the mutations hit the bytes the description reads first (headers, the first records)
        i = int(rng.integers(0, min(len(b), hot) if rng.integers(0, 2) else len(b)))
        kind = int(rng.integers(0, 5))
        if kind == 0:
            b[i] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            b[i] = int(rng.integers(0, 256))
        elif kind == 2:
            del b[i:]
        elif kind == 3:
            b[i:i] = bytes(rng.integers(0, 256, int(rng.integers(1, 5)), dtype=np.uint8))
        else:
            b[i:i + 2] = bytes([255, 255]) if rng.integers(0, 2) else bytes([0, 0])
        return bytes(b)

    def run(raw, spec, seed, n, hot):
        rng = np.random.default_rng(seed)
        ok = errors = 0
        for _ in range(n):
            m = mutate(raw, rng, hot)
            try:
                t = lo.read_stream(m, spec)
            except (lo.ConversionError, lo.LayoutError) as err:
                assert "<buffer>" in str(err), str(err)
                errors += 1
                continue
            assert lo.write_stream(t, spec) == m, (spec, seed)
            ok += 1
        return ok, errors

    n = {n}
    folder = tempfile.mkdtemp()
    files = [(_las("1.2", 3, vlr=True)[0], "las", 400), (_las("1.4", 7, extra=True, evlr=True)[0], "las", 500),
             (_segy(os.path.join(folder, "a.sgy"), 5), "segy", 4000), (_segy(os.path.join(folder, "b.sgy"), 1),
             "segy", 4000), (_dbn_file(_dbn_records()), "dbn", 400)]
    print("OK", [run(raw, spec, k, n, hot) for k, (raw, spec, hot) in enumerate(files)])
""")


def _fuzz(n, timeout):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", FUZZ_CHILD.format(here=here, n=n)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("OK "))
    return ast.literal_eval(line[3:])


@pytest.mark.slow
def test_mutated_las_segy_dbn_files_are_errors_or_exact():
    """Each mutation of a laspy, segyio or databento-dbn file (in a child process: a crash
    or a hang fails the test) is a library error naming <buffer>, or tables that write
    back to exactly the mutated bytes."""
    totals = _fuzz(4, 300)
    assert [sum(t) for t in totals] == [4] * 5


@pytest.mark.slow
def test_hundreds_of_mutated_las_segy_dbn_files():
    totals = _fuzz(60, 600)  # (300 files: 60 mutations of each of the five)
    assert [sum(t) for t in totals] == [60] * 5
    assert all(ok > 0 and errors > 0 for ok, errors in totals), totals
