"""Record streams on the GPU (``read_stream(..., device="cuda")``): the transpose reads the
records through the offset index in its tile pass (kernels/cuda/gather.py). Without a GPU
these run in Numba's simulator (tests/conftest.py), on small streams; each table equals
the CPU path's, and ``write_stream`` takes the device tables back to the same bytes."""

import numpy as np
import pyarrow as pa
import pytest
from test_streams import ITCH, S, _packets, _pcap_by_hand, _random_stream, itch_file

import layouts as lo
from layouts.kernels.cuda import gather as G


def _bits(table: pa.Table) -> pa.Table:
    """Float columns as their bits (random bytes make NaNs, which Arrow's equals refuses)."""
    cols = []
    for c in table.columns:
        c = c.combine_chunks()
        if pa.types.is_floating(c.type):
            width = c.type.bit_width // 8
            c = pa.array(c.to_numpy(zero_copy_only=False).view(f"u{width}"))
        cols.append(c)
    return pa.table(cols, names=table.column_names)


def _same_both_ways(raw, spec):
    """The device tables equal the CPU's, and go back to ``raw``."""
    cpu, gpu = lo.read_stream(raw, spec), lo.read_stream(raw, spec, device="cuda")
    assert set(gpu) == set(cpu)
    for name in cpu:
        assert gpu[name].device == "cuda", name
        assert _bits(gpu[name].to_device("cpu").to_arrow()).equals(_bits(cpu[name].to_arrow())), name
    assert lo.write_stream(gpu, spec) == raw
    return gpu


@pytest.mark.slow
def test_itch_through_the_index_equals_the_cpu_both_ways():
    from layouts.kernels.cuda.gather import forward_at

    before = forward_at.cache_info().misses + forward_at.cache_info().hits
    raw, _ = itch_file(np.random.default_rng(31), list(ITCH), 6)
    _same_both_ways(raw, "itch50")
    after = forward_at.cache_info()
    assert after.misses + after.hits > before  # the gathered kernel ran, not the gather pass


def test_pcap_on_the_gpu_equals_the_cpu_both_ways():
    # the packets have tails (_tail): converted on the CPU and moved; the header too
    cap = _pcap_by_hand("<", False, _packets(np.random.default_rng(32), 5))
    _same_both_ways(cap, "pcap")


@pytest.mark.parametrize("seed", [40, 163, 260])
@pytest.mark.slow
def test_random_descriptions_through_the_index_equal_the_cpu_both_ways(seed):
    # odd widths widened, either byte order, text checked, floats from random bytes
    spec, raw, _ = _random_stream(np.random.default_rng(seed))
    assert spec.sections[0].tail == "error"  # no tails: every type goes through the index
    _same_both_ways(raw, spec)


@pytest.mark.slow
def test_records_too_large_to_stage_are_gathered_first():
    # a 1,700-byte record: a tile of 32 is over the shared-memory limit, so the records
    # are gathered into packed records, then the unstaged transpose; same tables
    rec = S.Record([("tag", "u1"), ("v", ">u6"), ("blob", "S1700"), ("name", "S4")], text=("name",))
    spec = S([S.Section(S.Framing(length=S.Length(0, 2, "big")), [S.RecordType("big", rec, 66)], tag=S.Tag(0, 1))])
    rng = np.random.default_rng(33)
    raw = b""
    for _ in range(3):
        body = bytes([66]) + rng.integers(0, 256, 6 + 1700, dtype=np.uint8).tobytes() + b"ABCD"
        raw += len(body).to_bytes(2, "big") + body
    assert not G.stageable(8 + 1 + 8 + 1700 + 4)
    _same_both_ways(raw, spec)
    bad = bytearray(raw)
    bad[2 + 1 + 6 + 1700 + 1] = 0
    with pytest.raises(lo.ConversionError, match=r"byte 1709: text field 'name' .* holds a NUL byte"):
        lo.read_stream(bytes(bad), spec, device="cuda")


@pytest.mark.slow  # (the fast loop keeps a lighter one of its kind)
def test_a_nul_in_a_text_field_is_found_in_the_tile_pass():
    # the second record of three: the row and field named as the CPU names them
    raw, _ = itch_file(np.random.default_rng(34), ["R"], 3)
    size = len(raw) // 3
    bad = bytearray(raw)
    bad[size + 2 + 11 + 3] = 0  # a byte of the second directory record's stock
    with pytest.raises(lo.ConversionError) as cpu_err:
        lo.read_stream(bytes(bad), "itch50")
    with pytest.raises(lo.ConversionError) as gpu_err:
        lo.read_stream(bytes(bad), "itch50", device="cuda")
    assert str(gpu_err.value) == str(cpu_err.value)
    assert (
        f"byte {size + 2 + 11}: text field 'stock' of a itch50 section[0] type 'stock_directory' record (at byte {size})"
        in str(gpu_err.value)
    )


def test_the_index_is_checked_before_a_kernel_reads_it():
    bmap = G.byte_map(16, [(2, 8, 4), (0, 12, 2)], 0)
    G.check_index(np.array([0, 10], np.int64), 16, bmap)  # bytes up to 10 + 5 of 16
    with pytest.raises(ValueError, match=r"record offsets 0\.\.11 with bytes up to 5 .* 16 bytes"):
        G.check_index(np.array([0, 11], np.int64), 16, bmap)
    with pytest.raises(ValueError, match=r"record offsets -1\.\.0"):
        G.check_index(np.array([-1, 0], np.int64), 16, bmap)
    from layouts.kernels.plan import COUNT, K_CSTR, KIND, NCOLS, OFFS, WIDTH

    ops = np.zeros((1, NCOLS), np.int64)
    ops[0, [KIND, WIDTH, COUNT, OFFS]] = K_CSTR, 4, 1, 0
    G.check_strings(ops, np.array([8], np.int64), bmap)  # bytes 8..12 are the run from 2
    with pytest.raises(ValueError, match=r"string op 0 element 0 \(bytes 10\.\.14\) is not one run"):
        G.check_strings(ops, np.array([10], np.int64), bmap)
