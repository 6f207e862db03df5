"""Hypothesis-generated records: AoS -> SoA -> AoS is bit-exact and agrees with NumPy."""

import contextlib

import numpy as np
import pyarrow as pa
import pytest
from conftest import TICK, ticks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import actual, expected, make_valid, struct_dtypes

import layouts as lo
from layouts.kernels import cpu


def random_records(dtype, layout, n, seed):
    rng = np.random.default_rng(seed)
    arr = np.frombuffer(rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).tobytes(), dtype=dtype).copy()
    make_valid(arr, layout, rng)
    return arr


def zero_holes(arr, layout):
    """The bytes to_aos must give back: padding zeroed, C strings cut at their first NUL."""
    raw = arr.view(np.uint8).reshape(len(arr), layout.itemsize).copy()
    for off, size in layout.holes:
        raw[:, off : off + size] = 0
    for f in layout.fields:
        if f.kind == "cstr":
            for off in f.element_offsets():
                chars = raw[:, off : off + f.width]
                chars[np.maximum.accumulate(chars == 0, axis=1)] = 0
    return raw


@contextlib.contextmanager
def streaming(on):
    """Force the CPU kernels' streaming path (output staged in cache, then written with
    streaming stores: normally for outputs of STREAM_BYTES and more) on or off."""
    old = cpu.host.STREAM_BYTES
    cpu.host.STREAM_BYTES = 0 if on else 1 << 62
    try:
        yield
    finally:
        cpu.host.STREAM_BYTES = old


def check_against_oracle(arr, layout, soa):
    table = soa.to_arrow()
    assert table.num_rows == len(arr)
    for f in layout.fields:
        got_values, got_nulls = actual(soa[f.name].to_arrow(), f)
        want_values, want_nulls = expected(arr, f)
        assert np.array_equal(got_nulls, want_nulls), f.name
        if isinstance(want_values, list):
            assert got_values == want_values, f.name
        else:
            assert np.array_equal(np.asarray(got_values), want_values), f.name


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dtype=struct_dtypes(),
    n=st.integers(0, 70),
    seed=st.integers(0, 2**32 - 1),
    flatten=st.booleans(),
    bytes_as=st.sampled_from(["fixed", "binary"]),
    stream=st.booleans(),
)
@pytest.mark.slow
def test_roundtrip_and_oracle(dtype, n, seed, flatten, bytes_as, stream):
    layout = lo.Layout.from_dtype(dtype, flatten=flatten, bytes_as=bytes_as)
    arr = random_records(dtype, layout, n, seed)
    with streaming(stream):
        soa = lo.AoS(arr, layout).to_soa(threads=2)
        back = soa.to_aos(threads=2)
    check_against_oracle(arr, layout, soa)
    assert back.array.dtype == dtype
    assert np.array_equal(back.array.view(np.uint8).reshape(n, layout.itemsize), zero_holes(arr, layout))
    # through pyarrow and back again: the same records
    again = lo.SoA.from_arrow(soa.to_arrow(), layout).to_aos()
    assert np.array_equal(again.array.view(np.uint8).reshape(n, layout.itemsize), zero_holes(arr, layout))


@pytest.mark.parametrize("threads, stream", [(1, False), (2, False), (3, False), (2, True), (3, True)])
def test_many_chunks_match_one(threads, stream):
    """Chunk and block boundaries (bitmaps, strings, staged output) must not show: the
    same bytes at any thread count, streamed or not."""
    dtype = np.dtype(
        [
            ("a", "<i2"),
            ("b", "?", (3,)),
            ("s", "S5"),
            ("u", ">U3"),
            ("t", ">M8[W]"),
            ("f", ">i8"),
            ("k", "?"),
            ("x", "u1"),
        ],
        align=True,
    )
    layout = lo.Layout.from_dtype(dtype, bytes_as="binary")
    n = 300_001
    arr = random_records(dtype, layout, n, 7)
    with streaming(stream):
        soa = lo.AoS(arr, layout).to_soa(threads=threads)
        ref = lo.AoS(arr, layout).to_soa(threads=1).to_arrow()
        out = np.full(n * layout.itemsize, 0xFF, dtype=np.uint8)
        soa.to_aos(threads=threads, out=out)
    assert soa.to_arrow().equals(ref)
    check_against_oracle(arr[:2000], layout, lo.AoS(arr[:2000], layout).to_soa())
    assert np.array_equal(out, zero_holes(arr, layout).ravel())  # padding zeroed over 0xFF


@pytest.mark.parametrize("stream", [False, True])
def test_c_bit_fields_written_over_garbage(stream):
    """Bit-fields share container words with bits no field owns: written back over
    0xFF bytes, those bits and the padding come out zero, streamed or not."""
    layout = lo.Layout.from_c(
        """
        enum color { RED, GREEN, BLUE };
        struct r { unsigned a : 3, b : 9; short s : 5; enum color c; double x; char tag[5]; };
    """,
        "r",
    )
    n = 70_001
    rng = np.random.default_rng(3)
    values = {
        "a": rng.integers(0, 8, n),
        "b": rng.integers(0, 512, n),
        "s": rng.integers(-16, 16, n),
        "c": rng.integers(0, 3, n),
        "x": rng.random(n),
    }
    table = lo.AoS(np.zeros(n, layout.dtype), layout).to_soa().to_arrow()
    for name, column in values.items():
        i = table.schema.get_field_index(name)
        typ = table.schema.field(name).type
        array = (
            pa.DictionaryArray.from_arrays(
                pa.array(column, pa.int32()), typ.value_type and table.column(name).chunk(0).dictionary
            )
            if pa.types.is_dictionary(typ)
            else pa.array(column, typ)
        )
        table = table.set_column(i, name, array)
    clean = np.zeros(n * layout.itemsize, dtype=np.uint8)
    with streaming(False):
        lo.SoA.from_arrow(table, layout).to_aos(out=clean)
    garbage = np.full(n * layout.itemsize, 0xFF, dtype=np.uint8)
    with streaming(stream):
        lo.SoA.from_arrow(table, layout).to_aos(out=garbage, threads=2)
    assert np.array_equal(garbage, clean)
    back = lo.AoS(clean, layout).to_soa().to_arrow()
    for name in ("a", "b", "s", "x"):
        assert back.column(name).to_pylist() == values[name].tolist(), name
    assert back.column("c").combine_chunks().indices.to_pylist() == values["c"].tolist()


@pytest.mark.parametrize("stream", [False, True])
def test_records_too_big_to_stage(stream):
    """Records over STAGE_RECORD_MAX bytes are written in place (padding cleared per
    block), the rest staged: the same bytes either way, over 0xFF garbage."""
    dtype = np.dtype([("k", "u1"), ("v", "<f8", (700,)), ("b", "?"), ("s", ">i2")], align=True)
    assert dtype.itemsize > cpu.memory.STAGE_RECORD_MAX
    layout = lo.Layout.from_dtype(dtype)
    arr = random_records(dtype, layout, 300, 11)
    out = np.full(300 * dtype.itemsize, 0xFF, dtype=np.uint8)
    with streaming(stream):
        lo.AoS(arr, layout).to_soa(threads=2).to_aos(out=out, threads=2)
    assert np.array_equal(out, zero_holes(arr, layout).ravel())


@pytest.mark.slow
def test_tick_records_roundtrip(device):
    a = ticks(10_000 if device == "cpu" else 330)  # the CUDA simulator is slow (330: two tiles)
    soa = lo.AoS(a).to_soa(device=device)
    assert soa.device == device
    t = soa.to_device("cpu").to_arrow()
    assert t.column("sym").to_pylist()[:3] == [bytes(x).ljust(8, b"\0") for x in a["sym"][:3]]
    assert t.column("pos").to_pylist()[5] == pytest.approx(a["pos"][5].tolist())
    assert t.column("flag").to_pylist() == a["flag"].tolist()
    back = soa.to_aos(device=device).to_device("cpu").array
    assert np.array_equal(back.view(np.uint8).reshape(len(a), -1), zero_holes(a, soa.layout))
    assert (back == a).all()


def test_strided_records_and_raw_buffers():
    a = ticks(1000)
    strided = lo.AoS(a[::3]).to_soa().to_arrow()
    assert strided.column("ts").to_pylist() == a["ts"][::3].tolist()
    raw = lo.AoS(a.tobytes(), layout=TICK).to_soa().to_arrow()
    assert raw.column("px").to_pylist() == a["px"].tolist()
    mv = lo.AoS(memoryview(bytearray(a.tobytes())), layout=lo.Layout.from_dtype(TICK))
    assert len(mv) == 1000


def test_reused_output_arena():
    a, b = ticks(5000, seed=1), ticks(3000, seed=2)
    first = lo.AoS(a).to_soa(nulls={"qty": -1})
    second = lo.AoS(b).to_soa(nulls={"qty": -1}, out=first)
    assert second.arena is first.arena
    assert len(second) == 3000
    assert second.to_arrow().column("px").to_pylist() == b["px"].tolist()
    assert second.to_arrow().column("qty").null_count == int((b["qty"] == -1).sum())
    assert (second.to_aos().array == b).all()  # the sentinel goes back under each null
    out = np.zeros(3000, TICK)
    lo.SoA.from_arrow(second.to_arrow(), TICK, fill={"qty": -1}).to_aos(out=out)
    assert (out == b).all()


def test_empty_and_single_record():
    for n in (0, 1):
        a = ticks(n)
        soa = lo.AoS(a).to_soa()
        assert soa.to_arrow().num_rows == n
        assert (soa.to_aos().array == a).all()
