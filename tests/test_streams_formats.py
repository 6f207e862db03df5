"""Record streams on the formats the language must express, each tested on files written
by its own library: LAS 1.2-1.4 point files (laspy), SEG-Y (segyio) and Databento DBN
(databento-dbn). Values equal the library's reader's; write_stream gives back the file
byte for byte. Also the language parts these formats needed: header.size (fields absent
in older versions), max()/min() in expressions, select (the type from a header field),
framing = "fixed", and lists whose length is a header field."""

import io
import struct

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
    las.X = rng.integers(-2**31, 2**31 - 1, n)
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
        las.vlrs.append(laspy.VLR(user_id="layouts", record_id=7, description="a test VLR",
                                  record_data=b"projection, say"))
    if evlr:
        from laspy.vlrs.vlrlist import VLRList

        las.evlrs = VLRList([laspy.VLR(user_id="layouts", record_id=8, description="an EVLR", record_data=b"x" * 40)])
    bio = io.BytesIO()
    las.write(bio)
    raw = bio.getvalue()
    return raw, laspy.read(io.BytesIO(raw))


LAS_CASES = [("1.2", 0), ("1.2", 1), ("1.2", 2), ("1.2", 3), ("1.3", 4), ("1.3", 5), ("1.4", 0), ("1.4", 6),
             ("1.4", 7), ("1.4", 8), ("1.4", 9), ("1.4", 10)]


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
        assert h["point_count"] == 7 and h["points_by_return"] == [int(v) for v in las.header.number_of_points_by_return]
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
    points = points.set_column(points.column_names.index("intensity"), "intensity",
                               pa.array(np.arange(10, dtype=np.uint16) * 3))
    header = t["_header"].to_arrow()
    header = header.set_column(header.column_names.index("point_count"), "point_count", pa.array([4], pa.uint64()))
    t2 = dict(t, format6=points.slice(3, 4), _header=header)
    lo.write_stream(t2, "las", tmp_path / "fewer.las")
    back = laspy.read(tmp_path / "fewer.las")
    assert back.intensity.tolist() == [9, 12, 15, 18]
    assert back.X.tolist() == las.X[3:7].tolist()
    with pytest.raises(lo.ConversionError, match=r"the header's count = 'max\(legacy_point_count, point_count\)' is "
                                                 r"10, but the tables hold 4 records; set the header field to 4"):
        lo.write_stream(dict(t, format6=points.slice(3, 4)), "las")


def _set(raw, at, fmt, value):
    b = bytearray(raw)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def test_las_damaged_headers_are_errors_naming_the_field():
    raw, _ = _las("1.2", 1)
    with pytest.raises(lo.ConversionError, match=r"<buffer>: 50 bytes, shorter than the 96 bytes of a las header "
                                                 r"that give its size"):
        lo.read_stream(raw[:50], "las")
    with pytest.raises(lo.ConversionError, match=r"header.size = 'header_size' is 231, which cuts field "
                                                 r"'start_of_waveform_data' \(bytes 227..235\)"):
        lo.read_stream(_set(raw, 94, "<H", 231), "las")
    with pytest.raises(lo.ConversionError, match=r"header.size = 'header_size' is 20, less than the 96 bytes "
                                                 r"holding the fields it is computed from"):
        lo.read_stream(_set(raw, 94, "<H", 20), "las")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: 227 bytes, shorter than its 375-byte header"):
        lo.read_stream(_set(raw, 94, "<H", 375)[:227], "las")
    with pytest.raises(lo.ConversionError, match=r"las section\[0\]: offset = 'offset_to_point_data' is 4000000000, "
                                                 r"outside the file"):
        lo.read_stream(_set(raw, 96, "<I", 4_000_000_000), "las")
    with pytest.raises(lo.ConversionError, match=r"las section\[0\]: select = 'point_data_format_id' is 131, no type "
                                                 r"of the section \(types: format0=0, .*\); the header is damaged, or "
                                                 r"the file uses a kind of record the description lacks"):
        lo.read_stream(_set(raw, 104, "B", 131), "las")  # a LAZ (compressed) file sets bit 7
    with pytest.raises(lo.ConversionError, match=r"count = 'max\(legacy_point_count, point_count\)' is 4294967295, "
                                                 r"more records than the 196 bytes from byte 227 can hold"):
        lo.read_stream(_set(raw, 107, "<I", 2**32 - 1), "las")
    with pytest.raises(lo.ConversionError, match=r"count = 'max\(legacy_point_count, point_count\)' is 7, more "
                                                 r"records than the 195 bytes from byte 227 can hold"):
        lo.read_stream(raw[:-1], "las")
    with pytest.raises(lo.ConversionError, match=r"framing.size = 'point_data_record_length' is 0; fixed records "
                                                 r"need a size >= 1"):
        lo.read_stream(_set(raw, 105, "<H", 0), "las")
    with pytest.raises(lo.ConversionError, match=r"type 'format1' record of 20 bytes, shorter than the type's 28 "
                                                 r"bytes of fields"):
        lo.read_stream(_set(raw, 105, "<H", 20), "las")


def test_las_write_refuses_what_the_header_contradicts():
    raw, _ = _las("1.2", 3)
    t = lo.read_stream(raw, "las")
    header = t["_header"].to_arrow().append_column("point_count", pa.array([7], pa.uint64()))
    with pytest.raises(lo.ConversionError, match=r"'_header' has column 'point_count', a field past the header's "
                                                 r"size = 'header_size' \(227 bytes\); drop the column"):
        lo.write_stream(dict(t, _header=header), "las")
    with pytest.raises(lo.ConversionError, match=r"table 'format3' has 7 records, but the header's select = "
                                                 r"'point_data_format_id' chooses type 'format2'"):
        h = t["_header"].to_arrow()
        h = h.set_column(h.column_names.index("point_data_format_id"), "point_data_format_id", pa.array([2], pa.uint8()))
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
                f.header[k] = {segyio.su.iline: il, segyio.su.xline: xl, segyio.su.offset: 7 * k - 20,
                               segyio.su.cdpx: 1000 + k, segyio.su.tracf: k + 1}
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
    assert tr.num_rows == 12 and tr.column("_offset").to_pylist() == [3600 + k * (240 + 25 * tr.schema.field(
        "samples").type.value_type.bit_width // 8) for k in range(12)]
    assert tr.schema.field("samples").type.list_size == 25
    h = t["_header"].to_arrow().to_pylist()[0]
    with segyio.open(path, ignore_geometry=True) as f:
        assert (h["samples_per_trace"], h["sample_format"]) == (f.bin[segyio.su.hns], f.bin[segyio.su.format])
        # the textual header is the file's bytes (EBCDIC here); segyio gives it as ASCII
        assert h["textual_header"] == raw[:3200]
        assert h["textual_header"].decode("cp037")[:800] == bytes(f.text[0])[:800].decode("ascii")
        for col, key in [("inline_3d", segyio.su.iline), ("crossline_3d", segyio.su.xline),
                         ("offset", segyio.su.offset), ("cdp_x", segyio.su.cdpx), ("trace_number", segyio.su.tracf),
                         ("trace_sample_count", segyio.su.ns)]:
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
    assert gaps == [{"_offset": 3600, "_tail": raw[3600:6800]}] and gaps[0]["_tail"].decode("cp037").startswith("C 1 an extended")
    assert t["float32"].to_arrow().column("_offset").to_pylist()[0] == 6800
    assert lo.write_stream(t, "segy") == raw
    tr = t["float32"].to_arrow()
    new = np.arange(12 * 25, dtype=np.float32).reshape(12, 25)
    tr = tr.set_column(tr.column_names.index("samples"), "samples",
                       pa.FixedSizeListArray.from_arrays(pa.array(new.ravel()), 25))
    lo.write_stream(dict(t, float32=tr.slice(2, 5)), "segy", tmp_path / "new.sgy")
    with segyio.open(tmp_path / "new.sgy", ignore_geometry=True) as f:
        assert f.tracecount == 5 and np.array_equal(f.trace.raw[:], new[2:7])
    with pytest.raises(lo.ConversionError, match=r"the parts of the stream overlap at byte 3500 \(one ends at 3600, the next starts at 3500\)"):
        lo.write_stream({k: v for k, v in t.items() if k != "_gaps"} | {"_gaps": pa.table(
            {"_offset": pa.array([3500], pa.int64()), "_tail": pa.array([b"x" * 3300])})}, "segy")


def test_segy_damaged_binary_headers_are_errors(tmp_path):
    raw = _segy(tmp_path / "d.sgy", 5)
    with pytest.raises(lo.ConversionError, match=r"segy section\[0\]: select = 'sample_format' is 4, no type of the "
                                                 r"section \(types: ibm32=1, int32=2"):
        lo.read_stream(_set(raw, 3224, ">h", 4), "segy")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: segy section\[0\].types.ibm32.fields.samples: the list "
                                                 r"length 'samples_per_trace' is 0; a list needs at least 1 element"):
        lo.read_stream(_set(raw, 3220, ">H", 0), "segy")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: segy section\[0\].types.ibm32.fields.samples: the list "
                                                 r"length 'samples_per_trace' is 65535, more elements than the 7680 "
                                                 r"bytes of the data can hold"):
        lo.read_stream(_set(raw, 3220, ">H", 65535), "segy")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: byte 3600: the last record is truncated: 4080 bytes left, "
                                                 r"a record is 4240 bytes \(segy section\[0\]\)"):
        lo.read_stream(_set(raw, 3220, ">H", 1000), "segy")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: byte 4280: the last record is truncated: 300 bytes left, "
                                                 r"a record is 340 bytes"):
        lo.read_stream(raw[:4580], "segy")
    with pytest.raises(lo.ConversionError, match=r"offset = '3600 \+ 3200 \* extended_textual_headers' is 400, inside "
                                                 r"the part before it \(which ends at byte 3600\)"):
        lo.read_stream(_set(raw, 3504, ">h", -1), "segy")
    with pytest.raises(lo.ConversionError, match=r"offset = '3600 \+ 3200 \* extended_textual_headers' is 104851600, "
                                                 r"outside the file"):
        lo.read_stream(_set(raw, 3504, ">h", 32765), "segy")
    with pytest.raises(lo.ConversionError, match=r"<buffer>: 3000 bytes, shorter than the 3600-byte header of a segy "
                                                 r"stream"):
        lo.read_stream(raw[:3000], "segy")
