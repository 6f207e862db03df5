"""Signs kept (docs/mainframe.md, "Signs"): every valid sign (A, C, E, F positive; B, D
negative) reads as its value; sign_counts counts the values the way back would write
with another sign; keep_signs and put_signs make the way back byte for byte. Against
the reference decoder and encoder (tests/mainframe_reference.py), with hypothesis, on
the CPU and in the CUDA simulator."""

import mainframe_reference as mref  # noqa: E402 - tests/ is on the path
import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from test_mainframe_kinds import _layout, _records, encodings

import layouts as lo
from layouts import cobol

E = lo.Encoding
FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
SIM = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@st.composite
def signed_cells(draw, max_size=12):
    """A packed or overpunched zoned encoding, and cells of valid values, each with a sign
    drawn from the signs valid for it; ``(enc, width, count, cells, values)``."""
    enc, width = draw(encodings().filter(lambda e: e[0].kind in ("packed", "zoned")))
    if enc.sign.endswith("separate"):
        enc = E(**{**{k: getattr(enc, k) for k in enc.__dataclass_fields__}, "sign": "trailing"})
    enc = E(**{**{k: getattr(enc, k) for k in enc.__dataclass_fields__}, "invalid": "error"})
    width = enc.width()
    count = draw(st.sampled_from([1, 1, 2]))
    n = draw(st.integers(1, max_size)) * count
    cells, values = [], []
    for _ in range(n):
        unscaled = draw(st.integers(-(10**enc.digits - 1) if enc.signed else 0, 10**enc.digits - 1))
        if draw(st.integers(0, 3)) == 0:
            unscaled = 0  # zeros often: negative zero
        value = mref._finish(enc, -1 if unscaled < 0 else 1, str(abs(unscaled)))
        raw = mref.encode(enc, value, width)
        cells.append(mref.with_sign(enc, raw, draw(st.sampled_from(mref.signs_for(enc, unscaled)))))
        values.append(value)
    return enc, width, count, cells, values


def _rows(cells, count):
    return [cells[i : i + count] for i in range(0, len(cells), count)]


def _field_bytes(layout, back, width):
    raw = back.view(np.uint8).reshape(len(back), layout.itemsize)
    return [raw[r, off : off + width].tobytes() for r in range(len(back)) for off in layout["x"].element_offsets()]


def _check(enc, width, count, cells, values, device=None):
    layout = _layout(enc, width, count)
    recs = _records(layout, _rows(cells, count))
    assert [mref.decode(enc, c) for c in cells] == values  # every valid sign reads as its value
    table = lo.AoS(recs, layout).to_soa().to_arrow()
    col = table.column("x").combine_chunks()
    assert (col.flatten() if count > 1 else col).to_pylist() == values
    differ = sum(mref.sign_held(enc, c) != mref.rule_sign(enc, v) for c, v in zip(cells, values))
    held = recs if device is None else device(recs)
    assert cobol.sign_counts(held, layout) == ({"x": differ} if differ else {})
    kept = cobol.keep_signs(table, held, layout)
    codes = kept.column("_sign.x").combine_chunks()
    codes = (codes.flatten() if count > 1 else codes).to_pylist()
    assert codes == [
        None if mref.sign_held(enc, c) == mref.rule_sign(enc, v) else mref.sign_held(enc, c)
        for c, v in zip(cells, values)
    ]
    back = lo.SoA.from_arrow(kept, layout, extra="drop").to_aos().array
    # without the kept signs: each value with the rule's sign, as the reference encoder writes it
    assert _field_bytes(layout, back, width) == [
        mref.with_sign(enc, c, mref.rule_sign(enc, v)) for c, v in zip(cells, values)
    ]
    if device is None:
        cobol.put_signs(back, kept, layout)
        assert back.tobytes() == recs.tobytes()  # byte for byte
    else:
        on_device = device(back)
        cobol.put_signs(on_device, kept, layout)
        assert on_device.copy_to_host().tobytes() == recs.tobytes()


@seed(2703)
@FAST
@given(data=st.data())
def test_every_valid_sign_reads_and_comes_back_byte_for_byte(data):
    _check(*data.draw(signed_cells()))


@pytest.mark.slow
@seed(2704)
@SIM
@given(data=st.data())
def test_signs_kept_in_the_cuda_simulator(data):
    from numba import cuda

    def device(recs):
        return cuda.to_device(recs.view(np.uint8).reshape(-1))

    _check(*data.draw(signed_cells(max_size=4)), device=device)


BOOK = """
       01  R.
           05  AMT      PIC S9(3) COMP-3.
           05  U        PIC 9(3) COMP-3.
           05  Z        PIC S9(3).
           05  T OCCURS 2 TIMES.
               10 ZL    PIC S9(2) SIGN LEADING.
           05  SEP      PIC S9(2) SIGN TRAILING SEPARATE.
"""
REC = (
    bytes.fromhex("012F")  # AMT +12 with F: not the signed field's C
    + bytes.fromhex("012C")  # U +12 with C: not the unsigned field's F
    + "12".encode("cp037")
    + b"\xa3"  # Z +123 with zone A
    + bytes.fromhex("C1F2D0F0")  # ZL +12 (C: the rule), -0 (D on zero)
    + "12+".encode("cp037")
)


def test_counts_columns_and_the_way_back():
    layout = lo.Layout.from_copybook(BOOK)
    recs = np.frombuffer(REC * 3, layout.dtype)
    table = lo.AoS(recs, layout).to_soa().to_arrow()
    assert cobol.sign_counts(recs, layout) == {"AMT": 3, "U": 3, "Z": 3, "T.ZL": 3}
    kept = cobol.keep_signs(table, lo.AoS(recs, layout), layout)
    assert [n for n in kept.column_names if n.startswith("_sign.")] == [
        "_sign.AMT",
        "_sign.U",
        "_sign.Z",
        "_sign.T.ZL",
        "_sign.SEP",  # (a separate sign: its negative zeros)
    ]
    assert kept.schema.field("_sign.T.ZL").metadata == {b"layouts.sign_of": b"T.ZL"}
    assert kept.slice(0, 1).select(["_sign.AMT", "_sign.U", "_sign.Z", "_sign.T.ZL"]).to_pylist() == [
        {"_sign.AMT": 0xF, "_sign.U": 0xC, "_sign.Z": 0xA, "_sign.T.ZL": [None, 0xD]}
    ]
    back = np.array(lo.SoA.from_arrow(kept, layout, extra="drop").to_aos().array)
    assert back.tobytes() != recs.tobytes()
    assert cobol.put_signs(back, kept, layout).tobytes() == recs.tobytes()


def test_ascii_overpunch_kept():
    book = "       01  R.\n           05  Z  PIC S9(3).\n"
    layout = lo.Layout.from_copybook(book, codepage="ascii")
    data = b"12{" + b"123" + b"00}" + b"12J"  # +120 (C), +123 (F: plain), -0, -121
    recs = np.frombuffer(data, layout.dtype)
    table = lo.AoS(recs, layout).to_soa().to_arrow()
    assert [str(v) for v in table.column("Z").to_pylist()] == ["120", "123", "0", "-121"]
    assert cobol.sign_counts(recs, layout) == {"Z": 2}  # plain digits in a signed field (C), and -0
    kept = cobol.keep_signs(table, recs, layout)
    back = np.array(lo.SoA.from_arrow(kept, layout, extra="drop").to_aos().array)
    assert back.tobytes() == b"12{12C00{12J"
    assert cobol.put_signs(back, kept, layout).tobytes() == data
    import pyarrow as pa

    bad = kept.set_column(1, "_sign.Z", pa.array([0xA, None, None, None], pa.uint8()))
    back = np.array(lo.SoA.from_arrow(bad, layout, extra="drop").to_aos().array)
    with pytest.raises(lo.ConversionError, match=r"column '_sign.Z', row 0: sign A has no ASCII overpunch"):
        cobol.put_signs(back, bad, layout)


@pytest.mark.parametrize(
    ("codes", "match"),
    [
        ([0xD, None, None], r"column '_sign.AMT', row 0: sign D is negative, but the value is positive; fix the sign"),
        ([None, None, 0xC], r"column '_sign.AMT', row 2: sign C is positive, but the value is negative"),
        ([16, None, None], r"column '_sign.AMT': sign codes are 10-15 \(A-F\), or null; found 16"),
        ([None, 0x5, None], r"column '_sign.AMT', row 1: sign 5 is no sign \(valid: A, C, E, F positive; B, D"),
        ([None, 0, None], r"column '_sign.AMT': row 1: sign 0 is no sign .* null writes the field's own"),  # not null
    ],
)
def test_put_signs_refuses_a_sign_that_does_not_fit(codes, match):
    import pyarrow as pa

    book = "       01  R.\n           05  AMT  PIC S9(3) COMP-3.\n           05  U  PIC 9 COMP-3.\n"
    layout = lo.Layout.from_copybook(book)
    recs = np.frombuffer(bytes.fromhex("012C1F000C1F123D1F"), layout.dtype)
    table = cobol.keep_signs(lo.AoS(recs, layout).to_soa().to_arrow(), recs, layout)
    table = table.set_column(table.column_names.index("_sign.AMT"), "_sign.AMT", pa.array(codes, pa.uint8()))
    back = np.array(lo.SoA.from_arrow(table, layout, extra="drop").to_aos().array)
    with pytest.raises(lo.ConversionError, match=match):
        cobol.put_signs(back, table, layout)
    unsigned = table.set_column(table.column_names.index("_sign.U"), "_sign.U", pa.array([0xB, None, None], pa.uint8()))
    with pytest.raises(lo.ConversionError, match=r"column '_sign.U', row 0: sign B is negative, in an unsigned field"):
        cobol.put_signs(
            np.array(back), unsigned.set_column(0, "AMT", table.column("AMT")).drop_columns(["_sign.AMT"]), layout
        )


def test_put_signs_errors_name_the_fix():
    import pyarrow as pa

    book = "       01  R.\n           05  AMT  PIC S9(3) COMP-3.\n"
    layout = lo.Layout.from_copybook(book)
    recs = np.frombuffer(bytes.fromhex("012C"), layout.dtype)
    table = cobol.keep_signs(lo.AoS(recs, layout).to_soa().to_arrow(), recs, layout)
    with pytest.raises(
        lo.LayoutError,
        match=r"column '_sign.NOPE': the layout has no packed or zoned field 'NOPE' \(those whose signs are kept: AMT\); drop the column",
    ):
        cobol.put_signs(np.array(recs), table.append_column("_sign.NOPE", pa.array([None], pa.uint8())), layout)
    with pytest.raises(lo.LayoutError, match=r"put_signs writes into the records: give a writable"):
        cobol.put_signs(recs, table, layout)
    with pytest.raises(lo.LayoutError, match=r"the table has 1 rows and the records 2"):
        cobol.put_signs(np.zeros(2, layout.dtype), table, layout)
    with pytest.raises(lo.LayoutError, match=r"a column '_sign.AMT' already"):
        cobol.keep_signs(table, recs, layout)
    with pytest.raises(lo.LayoutError, match=r"the records are 3 bytes, not a whole number of 2-byte records"):
        cobol.sign_counts(b"\x01\x2c\x00", layout)


SM90_CHILD = r"""
import json
from numba import cuda
from numba.cuda import dispatcher
from layouts.kernels.ptx import link_info, occupancy
class _Target:
    compute_capability = (9, 0)
dispatcher.get_current_device = lambda: _Target()
from layouts.kernels.cuda import signs
out = {}
for name, (kernel, signature) in signs.KERNELS().items():
    ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    info = link_info(ptx, name, (9, 0))
    info["occupancy"] = occupancy(info["registers"], signs.THREADS, info["shared_static"])
    out[name] = info
print(json.dumps(out))
"""


@pytest.mark.slow
def test_sign_kernels_compile_for_sm90_without_spills():
    """The sign kernels (kernels/cuda/signs.py: KERNELS(), also for python -m
    layouts.kernels.ptx --also layouts.kernels.cuda.signs) compile for sm_90 without a GPU."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    run = subprocess.run([sys.executable, "-c", SM90_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(report) == {"read_signs", "write_signs"}
    for name, info in report.items():
        assert info["spill_stores"] == info["spill_loads"] == info["local"] == 0, (name, info)
        assert info["occupancy"] >= 0.5, (name, info)


def test_negative_zeros_of_a_separate_sign_are_counted_and_said(tmp_path, capsys):
    """A separate sign's '-' before zero digits: sign_counts counts it, the command says it
    comes back as +0 without --keep-signs, and with it keeps it (the way back byte for byte)."""
    from layouts import cobol
    from layouts._cli import main

    book = tmp_path / "x.cob"
    book.write_text(
        "       01  R.\n           05  Z PIC S9(3) SIGN TRAILING SEPARATE.\n"
        "           05  L PIC S9(2) SIGN LEADING SEPARATE.\n"
    )
    layout = lo.Layout.from_copybook(str(book))
    rows = [b"\xf0\xf0\xf0\x60\x60\xf0\xf0", b"\xf0\xf0\xf1\x60\x4e\xf0\xf0", b"\xf0\xf0\xf0\x4e\x60\xf0\xf1"]
    (tmp_path / "x.dat").write_bytes(b"".join(rows))
    assert cobol.sign_counts(np.frombuffer(b"".join(rows), layout.dtype), layout) == {"Z": 1, "L": 1}
    assert cobol.separate_sign_fields(layout) == {"Z", "L"}
    for extra in ([], ["--keep-signs"]):
        out = tmp_path / f"o{len(extra)}.parquet"
        assert main(["convert", str(tmp_path / "x.dat"), "--copybook", str(book), *extra, "--to", str(out)]) == 0
        said = capsys.readouterr().out
        if extra:  # kept: the way back writes them as they were
            assert "negative zero" not in said and "(signs kept: 2 fields hold some)" in said
            assert (
                main(["convert", str(out), "--copybook", str(book), "--keep-signs", "--to", str(tmp_path / "b.dat")])
                == 0
            )
            assert (tmp_path / "b.dat").read_bytes() == b"".join(rows)
        else:
            assert "1 negative zero of Z will come back as +0" in said and "1 negative zero of L" in said
            assert "pass --keep-signs to keep them" in said


def test_put_signs_names_a_negative_code_and_a_doubled_column():
    import pyarrow as pa

    layout = lo.Layout.from_copybook("       01  R.\n           05  AMT  PIC S9(3) COMP-3.\n")
    recs = np.frombuffer(bytes.fromhex("012C012D000D"), layout.dtype)
    kept = cobol.keep_signs(lo.AoS(recs, layout).to_soa().to_arrow(), recs, layout)
    back = np.array(lo.SoA.from_arrow(kept, layout, extra="drop").to_aos().array)
    negative = kept.set_column(1, "_sign.AMT", pa.array([None, -3, 13], pa.int8()))
    with pytest.raises(
        lo.ConversionError, match=r"column '_sign.AMT': sign codes are 10-15 \(A-F\), or null; found -3"
    ):
        cobol.put_signs(np.array(back), negative, layout)
    doubled = kept.append_column("_sign.AMT", pa.array([None] * 3, pa.uint8()))
    with pytest.raises(lo.LayoutError, match=r"the table has 2 columns '_sign.AMT'; keep one"):
        cobol.put_signs(np.array(back), doubled, layout)
