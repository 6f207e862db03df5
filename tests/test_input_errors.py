"""Every remaining user-facing error, matched by its text."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import TICK, ticks

import layouts as lo


def test_record_array_shapes():
    a = ticks(8)
    with pytest.raises(lo.LayoutError, match=r"records overlap or run backwards \(stride -48, itemsize 48\)"):
        lo.AoS(a[::-1])
    with pytest.raises(lo.LayoutError, match="a 2-D structured array must be C-contiguous"):
        lo.AoS(a.reshape(2, 4)[:, ::2])
    assert len(lo.AoS(a.reshape(2, 4))) == 8
    with pytest.raises(lo.LayoutError, match="a raw record buffer must be C-contiguous"):
        lo.AoS(np.zeros(200, np.uint8)[::2], layout=TICK)
    with pytest.raises(
        lo.LayoutError, match="AoS takes a structured array or an object with the buffer protocol, got int"
    ):
        lo.AoS(5, layout=TICK)


def test_out_arguments():
    soa = lo.AoS(ticks(100)).to_soa(nulls={"qty": -1})
    with pytest.raises(lo.LayoutError, match=r"out= was made with nulls for \['qty'\]; this call asks for \[\]"):
        lo.AoS(ticks(10)).to_soa(out=soa)
    with pytest.raises(lo.LayoutError, match="out= holds 100 records; these are 200"):
        lo.AoS(ticks(200)).to_soa(nulls={"qty": -1}, out=soa)
    with pytest.raises(lo.LayoutError, match="out= has layout"):
        lo.AoS(np.zeros(3, [("a", "<i4")])).to_soa(out=soa)
    with pytest.raises(lo.LayoutError, match="out= must be an SoA made by AoS.to_soa"):
        lo.AoS(ticks(3)).to_soa(out=np.zeros(3, TICK))
    with pytest.raises(lo.LayoutError, match="out= must be a writable, C-contiguous NumPy array"):
        soa.to_aos(out=np.zeros(100, TICK)[::2])
    with pytest.raises(lo.LayoutError, match="out= has 480 bytes; 100 records of 48 bytes need 4800"):
        soa.to_aos(out=np.zeros(10, TICK))
    # another dtype would show garbage afterwards; raw bytes and the layout's dtype are fine
    for wrong in (np.zeros(100, TICK.newbyteorder(">")), np.zeros(600, np.float64), np.zeros(100, [("a", "V48")])):
        with pytest.raises(lo.LayoutError, match=r"out= has dtype .*; records of this layout are .* \(or raw bytes\)"):
            soa.to_aos(out=wrong)
    assert (soa.to_aos(out=np.zeros(4800, np.uint8)).array == soa.to_aos().array).all()


def test_out_sharing_memory_with_the_input_is_refused():
    """Columns read zero-copy from Arrow may lie inside out=: the records would overwrite
    values not read yet (silently wrong values before)."""
    dt = np.dtype([("a", "<i4"), ("b", "<f8")], align=True)
    n = 5000
    buf = np.zeros(n * dt.itemsize, np.uint8)
    col = buf[: n * 4].view("<i4")
    col[:] = np.arange(n)
    table = pa.table({"a": pa.array(col), "b": pa.array(np.ones(n))})
    soa = lo.SoA.from_arrow(table, dt)
    with pytest.raises(lo.LayoutError, match="out= shares memory with column 'a' being written into it"):
        soa.to_aos(out=buf)
    assert (soa.to_aos(out=np.zeros(n, dt)).array["a"] == np.arange(n)).all()  # its own memory: fine
    # the forward way: an arena holding the very records being converted
    arena = lo.AoS(ticks(100)).to_soa()
    records = np.asarray(arena.arena).view(np.uint8)[: 10 * TICK.itemsize].view(TICK)
    with pytest.raises(lo.LayoutError, match="out= is an SoA whose arena holds these very records"):
        lo.AoS(records).to_soa(out=arena)


@pytest.mark.parametrize("threads", [2.5, True, "2", 0, -1])
def test_threads_checked_at_any_size(threads):
    for n in (5, 400_000):
        a = np.zeros(n, [("a", "<i8"), ("b", "<f8")])
        with pytest.raises(lo.LayoutError, match="threads must be"):
            lo.AoS(a).to_soa(threads=threads)
        with pytest.raises(lo.LayoutError, match="threads must be"):
            lo.SoA.from_arrow(pa.table({"a": a["a"], "b": a["b"]}), a.dtype).to_aos(threads=threads)


def test_nul_inside_a_value_bound_for_a_c_string(device):
    """C-string mode ends a string at its first NUL: writing one inside would lose the
    rest without a word, so it is refused on every device."""
    layout = lo.Layout.from_dtype(np.dtype([("s", "S4")]), bytes_as="binary")
    table = pa.table({"s": pa.array([b"ab", b"a\x00b"])})
    with pytest.raises(lo.ConversionError, match=r"column 's', row 1: b'a\\x00b' holds a NUL byte.*bytes_as='fixed'"):
        lo.SoA.from_arrow(table, layout).to_device(device).to_aos()


def test_layout_option_values():
    with pytest.raises(lo.LayoutError, match=r"void_as must be one of \('error', 'bytes', 'skip'\), got 'zero'"):
        lo.Layout.from_dtype(TICK, void_as="zero")
    with pytest.raises(lo.LayoutError, match="flatten must be True or False, got 'yes'"):
        lo.Layout.from_dtype(TICK, flatten="yes")
    with pytest.raises(lo.LayoutError, match="bytes_as must be a str or a dict, got list"):
        lo.Layout.from_dtype(TICK, bytes_as=["fixed"])
    with pytest.raises(lo.LayoutError, match="device must be one of"):
        lo.AoS(ticks(1)).to_soa(device="tpu")
    with pytest.raises(KeyError, match="no leaf field 'zz' in this layout"):
        lo.Layout.from_dtype(TICK)["zz"]


def test_arrow_shapes_that_do_not_match():
    nested = np.dtype([("q", [("bid", "<f8"), ("ask", "<f8")]), ("p", "<f4", (2,))])
    good = lo.AoS(np.zeros(2, nested)).to_soa().to_arrow()
    with pytest.raises(lo.ConversionError, match=r"column 'q' has no child 'ask' \(it has \['bid'\]\)"):
        lo.SoA.from_arrow(good.set_column(0, "q", pa.StructArray.from_arrays([pa.array([1.0, 2.0])], ["bid"])), nested)
    with pytest.raises(lo.ConversionError, match="column 'q' has Arrow type double; the layout needs struct"):
        lo.SoA.from_arrow(good.set_column(0, "q", pa.array([1.0, 2.0])), nested)
    three = pa.array([[1, 2, 3], [4, 5, 6]], pa.list_(pa.float32(), 3))
    with pytest.raises(lo.ConversionError, match="column 'p' holds lists of 3; the field is a sub-array of 2"):
        lo.SoA.from_arrow(good.set_column(1, "p", three), nested)
    as_lists = good.set_column(1, "p", pa.array([[1, 2], [3, 4]], pa.list_(pa.float32())))
    assert lo.SoA.from_arrow(as_lists, nested).to_aos().array["p"].tolist() == [[1, 2], [3, 4]]
    with pytest.raises(lo.ConversionError, match=r"fill\['s'\]=5 is not a binary value"):
        lo.SoA.from_arrow(pa.table({"s": pa.array([b"a", None])}), np.dtype([("s", "S2")]), fill={"s": 5})
    filled = lo.SoA.from_arrow(pa.table({"s": pa.array([b"a", None])}), np.dtype([("s", "S2")]), fill={"s": b"zz"})
    assert filled.to_aos().array["s"].tolist() == [b"a", b"zz"]


def test_extreme_timestamp_is_named_in_the_message():
    secs = pa.table({"t": pa.array([0, -(2**63) + 1], pa.timestamp("s"))})
    with pytest.raises(lo.ConversionError, match=r"column 't', row 1: .* is not a whole number of the unit"):
        lo.SoA.from_arrow(secs, np.dtype([("t", "<M8[m]")])).to_aos()
