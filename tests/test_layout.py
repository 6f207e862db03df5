"""Layout: field mappings, the printed table, hashing, and errors that name the field."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import TICK

import layouts as lo


def test_tick_layout_fields_and_schema():
    L = lo.Layout.from_dtype(TICK)
    assert L.names == ["ts", "px", "qty", "side", "sym", "pos", "flag"]
    assert L.itemsize == 48 and L["pos"].shape == (3,) and L["sym"].arrow_type == pa.binary(8)
    assert L.schema.field("pos").type == pa.list_(pa.float32(), 3)
    assert L.holes == ((29, 3), (45, 3))
    text = str(L)
    assert "48 bytes per record" in text and "(padding)" in text and "fixed_size_binary[8]" in text
    assert "6 padding bytes (12.5%)" in text


def test_layouts_are_values():
    a, b = lo.Layout.from_dtype(TICK), lo.Layout(TICK)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != a.replace(flatten=True)
    with pytest.raises(Exception):
        a.flatten = True


@pytest.mark.parametrize(
    "spec, arrow",
    [
        ("<M8[ns]", pa.timestamp("ns")),
        (">M8[ms]", pa.timestamp("ms")),
        ("<M8[h]", pa.timestamp("s")),
        ("<M8[D]", pa.date32()),
        ("<M8[W]", pa.date32()),
        ("<M8[M]", pa.date32()),
        ("<M8[Y]", pa.date32()),
        ("<m8[us]", pa.duration("us")),
        ("<m8[D]", pa.duration("s")),
        ("<M8[ps]", pa.int64()),
        ("<m8[M]", pa.int64()),
        ("<f2", pa.float16()),
        (">u2", pa.uint16()),
        ("?", pa.bool_()),
        ("U3", pa.string()),
    ],
)
def test_scalar_mappings(spec, arrow):
    assert lo.Layout.from_dtype([("x", spec)]).fields[0].arrow_type == arrow


def test_nested_complex_flatten_and_strings():
    dt = np.dtype([("q", [("bid", ">f8"), ("z", "<c8")]), ("s", "S4")])
    L = lo.Layout.from_dtype(dt, bytes_as={"s": "string"})
    assert L.names == ["q.bid", "q.z.re", "q.z.im", "s"]
    assert L.schema.field("q").type == pa.struct(
        [("bid", pa.float64()), ("z", pa.struct([("re", pa.float32()), ("im", pa.float32())]))]
    )
    assert L.schema.field("s").type == pa.string()
    assert L.replace(flatten=True).schema.names == ["q.bid", "q.z.re", "q.z.im", "s"]
    assert L["q.bid"].byteorder == "big" and L["q.bid"].swapped


def test_padding_voids_are_skipped():
    dt = np.dtype([("a", "<i4"), ("", "V4"), ("b", "<i2")])
    L = lo.Layout.from_dtype(dt)
    assert L.names == ["a", "b"] and L.holes == ((4, 4),)
    assert lo.Layout.from_dtype([("raw", "V3")], void_as="bytes").fields[0].arrow_type == pa.binary(3)


@pytest.mark.parametrize(
    "dtype, message",
    [
        ([("a", "<i4"), ("o", "O")], r"field 'o' at offset 4 has dtype \|O: Python objects are pointers"),
        ([("a", "u1"), ("raw", "V3")], r"field 'raw' at offset 1 has dtype \|V3: raw void bytes.*void_as='bytes'"),
        ([("g", "f16")], r"field 'g' at offset 0 has dtype <f16: Arrow has no 128-bit float"),
        ([("t", "M8")], r"field 't' at offset 0 has dtype <M8: a datetime without a unit"),
        ([("z", "c32")], r"field 'z' at offset 0 is complex256: Arrow has no float type"),
        ("<f8", r"needs a structured dtype with named fields, got float64"),
    ],
)
def test_unsupported_fields_name_field_and_offset(dtype, message):
    with pytest.raises(lo.LayoutError, match=message):
        lo.Layout.from_dtype(dtype)


def test_option_errors():
    with pytest.raises(lo.LayoutError, match=r"bytes_as names \['nope'\], which are not S<n> fields"):
        lo.Layout.from_dtype(TICK, bytes_as={"nope": "string"})
    with pytest.raises(lo.LayoutError, match="bytes_as modes are"):
        lo.Layout.from_dtype(TICK, bytes_as="utf16")
    with pytest.raises(TypeError, match=r"Layout.replace\(\) takes bytes_as, flatten, void_as"):
        lo.Layout.from_dtype(TICK).replace(align=True)


def test_aos_input_errors():
    with pytest.raises(
        lo.LayoutError,
        match="a buffer of 100 bytes is not a whole number of 48-byte records: 2 records and 4 bytes left over",
    ):
        lo.AoS(bytes(100), layout=TICK)
    with pytest.raises(lo.LayoutError, match="AoS of a raw bytes needs layout="):
        lo.AoS(bytes(96))
    with pytest.raises(lo.LayoutError, match="the array's dtype .* differs from the layout's"):
        lo.AoS(np.zeros(2, [("a", "<i4")]), layout=np.dtype([("a", ">i4")]))
