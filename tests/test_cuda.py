"""The CUDA backend against the CPU backend, bit for bit, in Numba's CUDA simulator
(or on a GPU when there is one): hypothesis-generated layouts (NumPy dtypes and C
declarations with bit-fields and enums), tile boundaries, records too large to stage,
nulls and fills, faults, device inputs and moves, zero-copy column exports."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import REAL_GPU, TICK, ticks
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oracle import struct_dtypes
from test_cdecl import c_records
from test_roundtrip import random_records, zero_holes

import layouts as lo
from layouts.kernels import cuda as kc

SIM = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _bits(buf, nbits):
    raw = np.frombuffer(buf, dtype=np.uint8)[: (nbits + 7) // 8].copy()
    if nbits % 8:
        raw[-1] &= (1 << (nbits % 8)) - 1
    return raw.tobytes()


def used_bytes(soa):
    """Every leaf's buffers, cut to the bytes that carry data (values under nulls too)."""
    out = []
    for c in soa.to_device("cpu")._columns:
        arr, n = c.to_array(), c.length
        bufs = arr.buffers()
        leaf = []
        if bufs[0] is not None:
            leaf.append(_bits(bufs[0], n))
        if c.offsets is not None:
            ow = 8 if pa.types.is_large_binary(c.type) or pa.types.is_large_string(c.type) else 4
            offsets = np.frombuffer(bufs[1], dtype=f"<i{ow}")[: n + 1]
            leaf += [offsets.tobytes(), np.frombuffer(bufs[2], np.uint8)[: offsets[-1]].tobytes()]
        elif c.type == pa.bool_():
            leaf.append(_bits(bufs[1], n))
        else:
            width = arr.type.index_type.bit_width // 8 if c.dictionary is not None else c.type.bit_width // 8
            leaf.append(np.frombuffer(bufs[1], np.uint8)[: n * width].tobytes())
            if c.dictionary is not None:
                leaf.append(c.dictionary.to_pylist())
        out.append(leaf)
    return out


def records_bytes(aos):
    host = aos.to_device("cpu")
    return host.array.view(np.uint8).reshape(-1).tobytes()


def both(arr, layout, **kw):
    """(CPU SoA, GPU SoA) of the same records."""
    return lo.AoS(arr, layout).to_soa(**kw), lo.AoS(arr, layout).to_soa(device="cuda", **kw)


@pytest.mark.slow  # (the fast loop keeps a lighter one of its kind)
@SIM
@given(
    dtype=struct_dtypes(),
    n=st.integers(0, 24),
    seed=st.integers(0, 2**32 - 1),
    bytes_as=st.sampled_from(["fixed", "binary"]),
)
@example(dtype=np.dtype([("a", "<U1"), ("b", "S2")]), n=0, seed=1, bytes_as="binary")  # empty string columns
def test_numpy_layouts_match_the_cpu_bit_for_bit(dtype, n, seed, bytes_as):
    layout = lo.Layout.from_dtype(dtype, bytes_as=bytes_as)
    arr = random_records(dtype, layout, n, seed)
    cpu, gpu = both(arr, layout)
    assert gpu.device == "cuda"
    assert used_bytes(gpu) == used_bytes(cpu)
    back = gpu.to_aos()
    assert back.device == "cuda"
    assert records_bytes(back) == records_bytes(cpu.to_aos()) == zero_holes(arr, layout).tobytes()


@pytest.mark.slow  # (the fast loop keeps a lighter one of its kind)
@SIM
@given(source=c_records(), n=st.integers(1, 24), seed=st.integers(0, 2**32 - 1))
@example(source="#include <stdint.h>\nstruct r { long long m0 : 63; };\n", n=1, seed=0)  # 2**63 - 1 masks
@example(source="#include <stdint.h>\nstruct r { unsigned long long u : 63; long long s : 64; };\n", n=3, seed=5)
def test_c_layouts_with_bit_fields_match_the_cpu(source, n, seed):
    try:
        layout = lo.Layout.from_c(source, "struct r")
    except lo.LayoutError:
        return  # the documented refusals, tested in test_cdecl
    if not layout.fields:
        return
    raw = np.random.default_rng(seed).integers(0, 256, n * layout.itemsize, dtype=np.uint8)
    arr = raw.view(layout.dtype)
    for f in layout.fields:  # floats may hold any bits; a _Bool byte is 0 or 1 (others: an error, below)
        assert f.kind in ("copy", "bits", "bool", "bytes", "cstr", "enum"), f
        if f.kind == "bool":
            rows = raw.reshape(n, layout.itemsize)
            for at in np.asarray(f.element_offsets()).reshape(-1):
                rows[:, at] &= 1
    cpu, gpu = both(arr, layout)
    assert used_bytes(gpu) == used_bytes(cpu)
    if not layout.aliases:
        assert records_bytes(gpu.to_aos()) == records_bytes(cpu.to_aos())


def test_a_boolean_byte_other_than_0_and_1_is_an_error_on_both_devices():
    """attack5: byte 02 or FF of a bool field became True and came back as 01, silently."""
    layout = lo.Layout.from_dtype(np.dtype([("a", "u1"), ("f", "?"), ("g", "?", (3,))]))
    arr = np.zeros(40, layout.dtype)
    arr["f"] = [i % 2 for i in range(40)]
    cpu, gpu = both(arr, layout)
    assert cpu.to_arrow().column("f").to_pylist() == gpu.to_device("cpu").to_arrow().column("f").to_pylist()
    for field, at, said in (("f", 1, ""), ("g", 3, r" \(element 1\)")):
        bad = arr.copy()
        bad.view(np.uint8).reshape(40, -1)[33, at] = 0xFF  # (g: its element 1)
        for device in ("cpu", "cuda"):
            with pytest.raises(
                lo.ConversionError, match=rf"field '{field}' .*record 33: byte FF{said}: a boolean is byte 00 or 01"
            ):
                lo.AoS(bad, layout).to_soa(device=device)


ENUMS = """
enum side { BUY = 1, SELL = -2, HOLD = 1000000 };
struct r { unsigned a : 3; int s : 5; enum side side; unsigned long long big : 40; _Bool f : 1;
           char name[6]; short v[2][3]; } __attribute__((packed));
"""


@pytest.mark.slow
def test_enums_bit_fields_and_packed_records_across_tiles():
    layout = lo.Layout.from_c(ENUMS, "struct r", byteorder="big")
    rows = kc.tile_shape(layout.itemsize)[0]
    n = 2 * rows + 37  # three tiles, the last one short
    rng = np.random.default_rng(3)
    arr = rng.integers(0, 256, n * layout.itemsize, dtype=np.uint8).view(layout.dtype)
    arr["side"] = rng.choice([1, -2, 1000000, 7], n)  # 7 has no enumerator
    cpu, gpu = both(arr, layout)
    assert used_bytes(gpu) == used_bytes(cpu)
    assert "7" in gpu.to_device("cpu")._columns[2].dictionary.to_pylist()
    assert records_bytes(gpu.to_aos()) == records_bytes(cpu.to_aos())


@pytest.mark.parametrize("itemsize", [8, 12, 13, 48, 2000])
@pytest.mark.slow
def test_slot_padding_and_unstaged_records(itemsize):
    """Even word counts get a spare word per slot; records too big for shared memory
    convert in global memory; both give the CPU's bytes."""
    dtype = np.dtype(
        {
            "names": ["a", "b", "c"],
            "formats": ["<i2", ">i2", "S3"],
            "offsets": [0, 2, itemsize - 3],
            "itemsize": itemsize,
        }
    )
    _, slot, staged = kc.tile_shape(itemsize)
    assert staged == (itemsize != 2000) and (slot != itemsize) == (itemsize in (8, 48))
    arr = random_records(dtype, lo.Layout.from_dtype(dtype), 70, itemsize)
    cpu, gpu = both(arr, dtype)
    assert used_bytes(gpu) == used_bytes(cpu)
    assert records_bytes(gpu.to_aos()) == records_bytes(cpu.to_aos())


@pytest.mark.slow
def test_nulls_fills_and_strings():
    dtype = np.dtype(
        [("q", "<i4"), ("px", ">f8"), ("t", ">M8[us]"), ("d", "<M8[M]"), ("s", "S4"), ("u", ">U2"), ("b", "?", (3,))]
    )
    a = np.zeros(90, dtype)
    a["q"] = np.arange(90) % 7 - 1
    a["px"] = np.where(np.arange(90) % 5 == 0, np.nan, np.arange(90) / 4)
    a["t"] = np.where(np.arange(90) % 4 == 0, np.datetime64("NaT"), np.datetime64("2024-01-01T00:00:00", "us"))
    a["d"] = np.datetime64("2023-05", "M")
    a["s"] = [b"ab", b"abcd", b"", b"\xc3\xa9"] * 22 + [b"x", b"y"]
    a["u"] = ["\u00e9", "\U0001f600", "", "ab"] * 22 + ["z", "w"]
    a["b"] = np.arange(270).reshape(90, 3) % 3 == 0
    layout = lo.Layout.from_dtype(dtype, bytes_as="string")
    nulls = {"q": -1, "px": float("nan")}
    cpu, gpu = both(a, layout, nulls=nulls)
    assert used_bytes(gpu) == used_bytes(cpu)
    assert gpu["q"].null_count == cpu["q"].null_count == 13
    assert records_bytes(gpu.to_aos()) == records_bytes(cpu.to_aos())
    # Arrow in, records out on the GPU: fills, truncation and the CPU's bytes
    table = pa.table(
        {
            "q": pa.array([1, None, 3], pa.int32()),
            "px": [0.5, 1.5, None],
            "t": pa.array([None, 5, 6], pa.timestamp("us")),
            "d": pa.array([19478, 19478, 0], pa.date32()),
            "s": [b"toolong", b"ok", b""],
            "u": ["abc", "d", ""],
            "b": [[True, False, True]] * 3,
        }
    )
    src = lo.SoA.from_arrow(table, layout, fill={"q": -1, "px": 0.0}, truncate=True)
    on_gpu = src.to_device("cuda")
    assert on_gpu.device == "cuda" and on_gpu.to_device("cpu").to_arrow().equals(src.to_arrow())
    assert records_bytes(on_gpu.to_aos()) == records_bytes(src.to_aos())


def fault(fn):
    with pytest.raises(lo.ConversionError) as err:
        fn()
    return str(err.value)


@pytest.mark.slow
def test_faults_give_the_cpu_message():
    over = np.zeros(40, [("t", "<M8[D]")])
    over["t"][17] = np.datetime64(2**40, "D")
    layout = lo.Layout.from_dtype(over.dtype)
    msg = fault(lambda: lo.AoS(over).to_soa(device="cuda"))
    assert msg == fault(lambda: lo.AoS(over).to_soa()) and "record 17" in msg
    bad = np.zeros(40, [("s", "S3")])
    bad["s"][9] = b"\xff"
    layout = lo.Layout.from_dtype(bad.dtype, bytes_as="string")
    assert fault(lambda: lo.AoS(bad, layout).to_soa(device="cuda")) == fault(lambda: lo.AoS(bad, layout).to_soa())
    cases = [
        (pa.table({"a": ["ok", "too long"]}), np.dtype([("a", "S3")]), {}),
        (pa.table({"a": pa.array([19478, 19479], pa.date32())}), np.dtype([("a", "<M8[M]")]), {}),
        (pa.table({"a": pa.array([1, 300], pa.int32())}), lo.Layout.from_c("struct r { int a : 8; };", "struct r"), {}),
    ]
    from layouts._arrow_in import columns_from_arrow

    for table, layout, fill in cases:
        # bound without the column checks' length test (from_arrow finds 'too long' before any
        # kernel runs), so that the kernels' own refusal is compared
        n, columns, fills = columns_from_arrow(
            table, lo.Layout.from_dtype(layout) if isinstance(layout, np.dtype) else layout, dict(fill), truncate=None
        )
        src = lo.SoA(lo.Layout.from_dtype(layout) if isinstance(layout, np.dtype) else layout, n, columns, fills=fills)
        assert fault(lambda src=src: src.to_device("cuda").to_aos()) == fault(src.to_aos)


@pytest.mark.slow
def test_scaled_times_match_the_cpu_and_fault_alike():
    """K_SCALE both ways: counts of minutes, hours, weeks and 10 ms scaled to Arrow's
    units and back (NaT as null), an overflow going out and an inexact value coming back
    give the CPU's bytes and messages (the GPU scales without a 64-bit division)."""
    dtype = np.dtype([("m", "<M8[m]"), ("h", ">m8[h]"), ("w", "<M8[W]"), ("c", "<M8[10ms]")])
    a = np.zeros(70, dtype)
    a["m"] = np.arange(70) * 7919 - 200_000
    a["h"] = np.arange(70) - 35
    a["w"] = np.arange(70) * 3 - 100
    a["c"] = np.arange(70) * 123_456_789
    a["m"][::9] = np.datetime64("NaT")
    a["c"][5] = np.datetime64(-(2**59), "10ms")  # near the edge: -5.8e18 ms
    layout = lo.Layout.from_dtype(dtype)
    cpu, gpu = both(a, layout)
    assert used_bytes(gpu) == used_bytes(cpu)
    assert records_bytes(gpu.to_aos()) == records_bytes(cpu.to_aos())
    over = a.copy()
    over["m"][33] = np.datetime64(2**62, "m")  # 2**62 minutes do not fit in int64 seconds
    msg = fault(lambda: lo.AoS(over, layout).to_soa(device="cuda"))
    assert msg == fault(lambda: lo.AoS(over, layout).to_soa()) and "record 33" in msg
    table = cpu.to_arrow()
    seconds = table.column("m").to_numpy(zero_copy_only=False).astype("M8[s]").astype(np.int64)
    seconds[12] += 1  # not a whole minute
    table = table.set_column(0, "m", pa.array(seconds, pa.timestamp("s"), mask=np.isnat(a["m"])))
    src = lo.SoA.from_arrow(table, layout)
    assert fault(lambda: src.to_device("cuda").to_aos()) == fault(src.to_aos)


def test_division_free_quotients_agree_with_python_compiled():
    """The device's exact division by a scale factor (an inverse modulo 2**64 instead of
    a 64-bit division), compiled by Numba for the CPU with the same types as for the
    GPU, against Python's ``%`` and ``//``, at the edges of int64."""
    import types

    import numba

    from layouts.kernels.plan import K_SCALE, KIND, NCOLS, P1

    def compiled(fn, **deps):
        env = dict(fn.py_func.__globals__, **deps)
        return numba.njit(types.FunctionType(fn.py_func.__code__, env, fn.py_func.__name__))

    quotient = compiled(kc.tile._exact_quotient, _mulmod64=compiled(kc.tile._mulmod64))
    factors = [1, 2, 7, 60, 1000, 3600, 86_400, 10**9, 86_400 * 10**9, 3 << 40, 2**62 + 1]
    ops = np.zeros((len(factors), NCOLS), np.int64)
    ops[:, KIND], ops[:, P1] = K_SCALE, factors
    rows = kc.device_ops(ops)
    rng = np.random.default_rng(7)
    for row, f in zip(rows, factors):
        top = 2**63 // f
        values = [0, 1, -1, f, -f, f + 1, 2**63 - 1, -(2**63), -(2**63) + 1, top * f, -top * f, top * f - 1]
        values += [int(x) for x in rng.integers(-(2**63), 2**63 - 1, 200, dtype=np.int64)]
        values += [int(x) * f + d for x in rng.integers(-top, top, 100, dtype=np.int64) for d in (0, 1)]
        for v in values:
            if not -(2**63) <= v < 2**63:
                continue
            exact, q = quotient(np.int64(v), row)
            assert exact == (v % f == 0), (v, f)
            assert not exact or q == v // f, (v, f, q)


@pytest.mark.slow
def test_more_tiles_than_blocks(monkeypatch):
    """Blocks take tiles in turn when the grid is smaller than the tile count."""
    monkeypatch.setattr(kc, "MAX_BLOCKS", 2)
    dtype = np.dtype(
        {"names": ["a", "b", "c"], "formats": ["<i4", ">i2", "S3"], "offsets": [0, 700, 1021], "itemsize": 1024}
    )
    rows, _, staged = kc.tile_shape(1024)
    assert staged
    arr = random_records(dtype, lo.Layout.from_dtype(dtype), 5 * rows + 7, 5)  # six tiles, two blocks
    cpu, gpu = both(arr, dtype)
    assert used_bytes(gpu) == used_bytes(cpu)
    assert records_bytes(gpu.to_aos()) == records_bytes(cpu.to_aos())


def test_device_inputs_convert_where_they_are():
    from numba import cuda

    a = ticks(100)
    dev = cuda.to_device(a)
    aos = lo.AoS(dev)  # the structured dtype gives the layout
    assert aos.device == "cuda" and len(aos) == 100 and aos.layout == lo.Layout.from_dtype(TICK)
    soa = aos.to_soa()
    assert soa.device == "cuda"
    assert soa.to_device("cpu").to_arrow().equals(lo.AoS(a).to_soa().to_arrow())
    raw = lo.AoS(cuda.to_device(a.view(np.uint8)), layout=TICK)
    assert raw.to_device("cpu").to_numpy().tobytes() == a.tobytes()
    assert lo.AoS(a).to_device("cuda").to_soa(device="cpu").device == "cpu"
    with pytest.raises(lo.LayoutError, match=r"a device buffer of 100 bytes is not a whole number of 48-byte"):
        lo.AoS(cuda.to_device(np.zeros(100, np.uint8)), layout=TICK)
    with pytest.raises(lo.LayoutError, match="AoS of device memory .* needs layout="):
        lo.AoS(cuda.to_device(np.zeros(96, np.uint8)))


def test_device_arena_reuse_and_misuse_messages():
    a, b = ticks(120, seed=1), ticks(80, seed=2)
    first = lo.AoS(a).to_soa(device="cuda")
    arena = first.arena
    again = lo.AoS(b).to_soa(device="cuda", out=first)
    assert again.arena is arena and len(again) == 80
    assert again.to_device("cpu").to_arrow().equals(lo.AoS(b).to_soa().to_arrow())
    with pytest.raises(lo.LayoutError, match="out= is on cpu; these records convert on cuda"):
        lo.AoS(a).to_soa(device="cuda", out=lo.AoS(a).to_soa())
    with pytest.raises(lo.LayoutError, match=r"SoA.to_arrow: the columns are on the GPU; use .to_device\('cpu'\)"):
        first.to_arrow()
    with pytest.raises(TypeError, match="column 'px' is on the GPU"):
        np.asarray(first["px"])
    with pytest.raises(lo.LayoutError, match=r"AoS.to_numpy: the records are on the GPU"):
        lo.AoS(a).to_device("cuda").to_numpy()


def test_column_exports_point_into_the_arena():
    from layouts._cuda import device as _device

    soa = lo.AoS(ticks(64)).to_soa(device="cuda")
    base = _device.pointer(soa.arena)
    offsets = {}
    for name in ("ts", "px", "pos"):
        cai = soa[name].__cuda_array_interface__
        offsets[name] = cai["data"][0] - base
        assert cai["version"] == 3 and cai["stream"] is None
    assert offsets["ts"] % 64 == 0 and 0 <= offsets["px"] < soa.nbytes
    assert soa["pos"].__cuda_array_interface__["shape"] == (64, 3)
    assert soa["px"].__dlpack_device__()[0] == 2  # kDLCUDA
    assert not hasattr(soa["flag"], "__cuda_array_interface__")  # bit-packed: no CAI
    assert not hasattr(lo.AoS(ticks(2)).to_soa()["px"], "__cuda_array_interface__")
    stats = lo.memory_stats()
    assert stats["allocator"] in ("simulator", "cupy", "rmm", "numba") and stats["arenas"] >= 1


# The committed figures (docs/gpu-kernels.md): theoretical occupancy on sm_90 at the
# host's launch configuration. A change that lowers one, or makes a kernel spill, fails.
OCCUPANCY_SM90 = {
    "forward": 0.75,
    "reverse": 0.5,
    "forward[tick]": 0.75,
    "reverse[tick]": 0.75,
    "forward[c]": 1.0,
    "reverse[c]": 0.75,
    "scan_blocks": 1.0,
    "scan_sums": 0.5,
    "scan_add": 1.0,
    "copy_strings": 0.75,
    "reduce_sum": 0.75,
    "reduce_min": 0.75,
    "reduce_max": 0.75,
    "reduce_count_greater": 0.75,
    "bits_to_bits": 1.0,
    "bits_to_bytes": 1.0,
    "bytes_to_bits": 1.0,
    "codes_with_nulls": 1.0,
    "offsets_check[int32]": 1.0,
    "offsets_check[int64]": 1.0,
    "offsets_rebase[int32]": 1.0,
    "offsets_rebase[int64]": 1.0,
    "stream_gather": 1.0,
    "forward_at": 0.75,
    "forward_at[stream]": 0.75,
    "copy_strings_at": 0.75,
    "forward[mainframe]": 0.625,
    "reverse[mainframe]": 0.5,
    "copy_text": 0.75,
}  # (COBOL kinds)


@pytest.mark.slow
def test_every_kernel_compiles_for_sm90_without_spills_or_lost_occupancy():
    """Type errors surface without hardware: numba-cuda compiles each kernel to PTX and
    nvJitLink links it for sm_90, reporting registers, spills and shared memory."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    variants = [f"--variant={name}={mask}" for name, mask in plan_kinds().items()]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "layouts.kernels.ptx",
            "--cc",
            "9.0",
            "--json",
            "--also",
            "layouts.benchmarks.reduce_cuda",
            "--also",
            "layouts.kernels.cuda.gather",
            *variants,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)["kernels"]
    assert set(report) == set(OCCUPANCY_SM90)
    for name, info in report.items():
        assert info["spill_stores"] == info["spill_loads"] == info["local"] == 0, (name, info)
        assert info["occupancy"] >= OCCUPANCY_SM90[name], (name, info)


C_RECORD = """
enum color { RED, GREEN, BLUE };
struct r { uint32_t a : 3, b : 9; int16_t s : 5; enum color c; double x; char tag[5]; };
"""


def plan_kinds():
    """``forward/reverse`` kind masks of the plans of the 48-byte tick and of a C record
    with bit-fields and an enum: the kernel variants the host code launches for them."""
    from layouts._arena import Arena
    from layouts._plan import forward_ops, reverse_ops
    from layouts.kernels.cuda import kinds_of

    masks = {}
    for name, layout in (
        ("tick", lo.Layout.from_dtype(TICK)),
        ("c", lo.Layout.from_c("#include <stdint.h>\n" + C_RECORD, "struct r")),
    ):
        records = np.zeros(64, layout.dtype)
        forward = kinds_of(forward_ops(Arena(layout, 64, frozenset()), 0, {})[0])
        soa = lo.AoS(records, layout=layout).to_soa()
        reverse = kinds_of(reverse_ops(layout, soa._columns, soa._fills, soa._truncate)[0])
        masks[name] = f"{forward}/{reverse}"
    return masks


def test_occupancy_follows_the_cuda_rules():
    from layouts.kernels.ptx import occupancy

    assert occupancy(32, 256, 0) == 1.0  # 8 blocks of 8 warps fill the SM
    assert occupancy(64, 256, 0) == 0.5  # 65,536 registers / (64 x 256) = 4 blocks
    assert occupancy(80, 256, 16_000) == 0.375  # 2,560 registers a warp: 25 warps, 3 blocks
    assert occupancy(32, 256, 100_000) == 0.25  # 228 KiB of shared memory hold 2 blocks
    assert occupancy(255, 1024, 0) == 0.0  # does not fit at all


@pytest.mark.cuda
def test_cupy_and_torch_take_columns_without_a_copy():
    cupy = pytest.importorskip("cupy")
    soa = lo.AoS(ticks(1000)).to_soa(device="cuda")
    px = cupy.asarray(soa["px"])
    assert px.data.ptr == soa["px"].__cuda_array_interface__["data"][0]
    assert np.array_equal(cupy.asnumpy(px), ticks(1000)["px"])
    from_dlpack = cupy.from_dlpack(soa["qty"])
    assert from_dlpack.data.ptr == soa["qty"].__cuda_array_interface__["data"][0]
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(soa["ts"])
    assert t.data_ptr() == soa["ts"].__cuda_array_interface__["data"][0]


@pytest.mark.cuda
def test_numba_and_cupy_share_one_pool():
    cupy = pytest.importorskip("cupy")
    from numba import cuda

    lo.AoS(ticks(10)).to_soa(device="cuda")
    stats = lo.memory_stats()
    assert stats["allocator"] in ("cupy", "rmm")
    if stats["allocator"] == "cupy":
        used = cupy.get_default_memory_pool().used_bytes()
        keep = cuda.device_array(1 << 20, dtype=np.uint8)  # Numba's allocation, from CuPy's pool
        assert cupy.get_default_memory_pool().used_bytes() >= used + (1 << 20)
        del keep


def test_real_gpu_flag_matches_the_simulator_setting():
    import os

    assert REAL_GPU == (os.environ.get("NUMBA_ENABLE_CUDASIM") in ("0", "", None))


def test_cudf_missing_names_the_extra():
    try:
        import cudf  # noqa: F401
    except ImportError:
        soa = lo.AoS(ticks(4)).to_soa(device="cuda")
        with pytest.raises(ImportError, match=r"need cuDF: pip install 'layouts-arrow\[cudf\]'"):
            soa.to_cudf()
        with pytest.raises(ImportError, match=r"need cuDF"):
            lo.SoA.from_cudf(object(), TICK)
    else:
        pytest.skip("cuDF is installed here")


@pytest.mark.cuda
def test_to_cudf_wraps_the_arena_and_from_cudf_comes_back():
    cudf = pytest.importorskip("cudf")
    dtype = np.dtype([("ts", "<i8"), ("px", "<f8"), ("qty", "<i4")])
    a = np.zeros(1000, dtype)
    a["ts"], a["px"], a["qty"] = np.arange(1000), np.arange(1000) / 8, np.arange(1000) % 9 - 1
    soa = lo.AoS(a).to_soa(device="cuda", nulls={"qty": -1})
    df = soa.to_cudf()
    assert isinstance(df, cudf.DataFrame) and df["qty"].null_count == int((a["qty"] == -1).sum())
    assert df["px"].data.ptr == soa["px"].__cuda_array_interface__["data"][0]  # no copy
    assert df["px"].to_numpy().tolist() == a["px"].tolist()
    back = lo.SoA.from_cudf(df, dtype, fill={"qty": -1}).to_aos().to_device("cpu").to_numpy()
    assert (back == a).all()


def test_device_misuse_errors_name_the_fix():
    from numba import cuda

    a = ticks(8)
    with pytest.raises(lo.LayoutError, match=r"a device record buffer must be C-contiguous, got strides"):
        lo.AoS(cuda.to_device(a)[::2])
    soa = lo.AoS(a).to_soa(device="cuda")
    with pytest.raises(lo.LayoutError, match="out= is for records on the CPU; on the GPU to_aos allocates"):
        soa.to_aos(out=np.zeros(8, TICK))
    with pytest.raises(AttributeError, match=r"column 'flag' is bool in Arrow .* has no __cuda_array_interface__"):
        soa["flag"].__cuda_array_interface__  # noqa: B018
    with pytest.raises(NotImplementedError, match="exports the columns' own schema only"):
        soa.__arrow_c_device_array__(requested_schema=object())
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"this needs CuPy: pip install 'layouts-arrow\[cuda13\]'"):
            soa["px"].__dlpack__()


def test_a_slice_of_a_large_batch_moves_only_its_own_bytes():
    """Columns borrowed from a slice go to the device cut to the slice (validity bits at
    an odd offset, rebased string offsets), and come back and write the CPU's records."""
    dtype = np.dtype([("q", "<i4"), ("b", "?"), ("s", "S5"), ("px", ">f8")])
    n = 4000
    rng = np.random.default_rng(11)
    table = pa.table(
        {
            "q": pa.array(rng.integers(-5, 5, n), pa.int32(), mask=rng.random(n) < 0.2),
            "b": rng.random(n) < 0.5,
            "s": [f"v{i % 997}".encode() for i in range(n)],
            "px": rng.normal(size=n),
        }
    )
    layout = lo.Layout.from_dtype(dtype, bytes_as="binary")
    part = table.slice(1237, 203)
    src = lo.SoA.from_arrow(part, layout, fill={"q": -1})
    on_gpu = src.to_device("cuda")
    assert on_gpu.nbytes < 20 * 203 + 64 * 8, on_gpu.nbytes  # not the 4000 rows' buffers
    assert on_gpu.to_device("cpu").to_arrow().equals(src.to_arrow())
    assert records_bytes(on_gpu.to_aos()) == records_bytes(src.to_aos())


@SIM
@given(
    dtype=struct_dtypes(),
    n=st.integers(0, 40),
    cut=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    seed=st.integers(0, 2**32 - 1),
    bytes_as=st.sampled_from(["fixed", "binary"]),
)
@pytest.mark.slow
def test_any_slice_of_arrow_columns_goes_to_the_device_and_back(dtype, n, cut, seed, bytes_as):
    """Any slice (validity and booleans at any bit offset, strings at any row) is packed
    for the device with its own bytes only, and writes the records the CPU writes."""
    layout = lo.Layout.from_dtype(dtype, bytes_as=bytes_as)
    table = lo.AoS(random_records(dtype, layout, n, seed), layout).to_soa().to_arrow()
    start = min(cut) % (n + 1)
    part = table.slice(start, abs(cut[1] - cut[0]))
    src = lo.SoA.from_arrow(part, layout)
    on_gpu = src.to_device("cuda")
    expect = records_bytes(src.to_aos())  # bytes, not Table.equals: random floats hold NaNs
    assert records_bytes(on_gpu.to_device("cpu").to_aos()) == expect  # the packed columns, back on the CPU
    assert records_bytes(on_gpu.to_aos()) == expect
