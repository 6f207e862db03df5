"""ASCII mainframe data (Cobrix's ``encoding=ascii``): the ``ascii`` and ``latin-1`` code
pages of text and zoned decimals, both ways, on the CPU and (in Numba's simulator) CUDA."""

from decimal import Decimal

import numpy as np
import pytest

import layouts as lo
from layouts._ebcdic import check_bijection

E = lo.Encoding
DTYPE = np.dtype([("T", "V6"), ("Z", "V4"), ("S", "V4"), ("L", "V3"), ("U", "V3")])


def _layout(codepage="ascii", invalid="error", trim="none", positive=""):
    return lo.Layout.from_dtype(
        DTYPE,
        encodings={
            "T": E("text", codepage=codepage, trim=trim),
            "Z": E("zoned", 4, 1, signed=True, codepage=codepage, positive=positive),
            "S": E("zoned", 3, signed=True, sign="leading separate", codepage=codepage),
            "L": E("zoned", 3, signed=True, sign="leading", codepage=codepage, positive=positive),
            "U": E("zoned", 3, codepage=codepage, invalid=invalid),
        },
    )


# T: text with a Latin-1 letter; Z: S999V9 trailing overpunch; S: leading separate; L: leading overpunch
RECORDS = b"AB \xe9  123}-012J23123" + b"xyz   012A+999{00042" + b"      0000+000000000"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("codepage", ["ascii", "latin-1"])
def test_ascii_text_and_zoned_both_ways(device, codepage):
    layout = _layout(codepage, positive="C")
    soa = lo.AoS(np.frombuffer(RECORDS, DTYPE), layout).to_soa(device=device).to_device("cpu")
    rows = soa.to_arrow().to_pylist()
    assert rows == [
        {"T": "AB é  ", "Z": Decimal("-123.0"), "S": Decimal("-12"), "L": Decimal("-123"), "U": Decimal("123")},
        {"T": "xyz   ", "Z": Decimal("12.1"), "S": Decimal("999"), "L": Decimal("0"), "U": Decimal("42")},
        {"T": "      ", "Z": Decimal("0.0"), "S": Decimal("0"), "L": Decimal("0"), "U": Decimal("0")},
    ]
    table = soa.to_arrow().slice(0, 2)
    back = lo.SoA.from_arrow(table, layout).to_device(device).to_aos().to_device("cpu").array.tobytes()
    assert back == RECORDS[:40]  # the third record's unsigned F-zone positives: positive="C" writes '{'


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_ascii_trim_and_padding_are_0x20(device):
    layout = _layout(trim="both", positive="F")
    table = lo.AoS(np.frombuffer(RECORDS, DTYPE), layout).to_soa(device=device).to_device("cpu").to_arrow()
    assert table.column("T").to_pylist() == ["AB é", "xyz", ""]
    back = lo.SoA.from_arrow(table.slice(2), layout).to_device(device).to_aos().to_device("cpu").array.tobytes()
    assert back == RECORDS[40:]  # '' padded with ASCII spaces, positives as plain digits (positive="F")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.slow
def test_ascii_invalid_zoned_bytes(device):
    raw = bytearray(RECORDS[:20])
    raw[17:20] = b" 12"  # a space is no ASCII digit
    layout = _layout(invalid="null")
    table = lo.AoS(np.frombuffer(bytes(raw), DTYPE), layout).to_soa(device=device).to_device("cpu").to_arrow()
    assert table.column("U").to_pylist() == [None] and table.column("U").null_count == 1
    with pytest.raises(lo.ConversionError, match=r"field 'U'.*bytes 20 31 32 .*20 is not an ASCII zoned digit"):
        lo.AoS(np.frombuffer(bytes(raw), DTYPE), _layout()).to_soa(device=device)
    raw[10] = ord("x")  # not '+' or '-'
    with pytest.raises(lo.ConversionError, match=r"field 'S'.*separate sign 78 is neither '\+' nor '-' in ascii"):
        lo.AoS(np.frombuffer(bytes(raw), DTYPE), _layout()).to_soa(device=device)


def test_ascii_code_pages_are_one_to_one_and_named():
    assert check_bijection("ascii") and check_bijection("latin-1")
    with pytest.raises(lo.LayoutError, match=r"code page 'utf-8' is not one .* ascii, latin-1"):
        E("text", codepage="utf-8")


def _reference(raw, signed, sign):
    """ASCII zoned bytes -> Decimal or None (plain Python, from the documented rules)."""
    over = "{ABCDEFGHI}JKLMNOPQR"
    body, negative = list(raw), False
    if sign.endswith("separate"):
        s = body.pop(0) if sign.startswith("leading") else body.pop()
        if s not in (0x2B, 0x2D):
            return None
        negative = s == 0x2D
    at = 0 if sign.startswith("leading") else len(body) - 1
    digits = []
    for i, b in enumerate(body):
        if 0x30 <= b <= 0x39:
            digits.append(b - 0x30)
        elif i == at and not sign.endswith("separate") and chr(b) in over:
            k = over.index(chr(b))
            if k >= 10 and not signed:
                return None
            digits.append(k % 10)
            negative = k >= 10
        else:
            return None
    value = Decimal("".join(map(str, digits)))
    return -value if negative else value


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("signed, sign", [(True, "trailing"), (True, "leading separate"), (False, "trailing")])
def test_ascii_zoned_matches_a_reference_and_the_message(device, signed, sign):
    """Random bytes from an alphabet of digits, signs, overpunches and others (fixed
    seed): null exactly where the reference finds no value (and the error message says
    why), the reference's value elsewhere."""
    from layouts._mainframe import why_invalid

    rng = np.random.default_rng(27)
    alphabet = np.frombuffer(b"0123456789{}AIJR+- p@\x00", np.uint8)
    width, n = 4, 300
    enc = E("zoned", width - sign.endswith("separate"), signed=signed, sign=sign, codepage="ascii", invalid="null")
    layout = lo.Layout.from_dtype(np.dtype([("x", f"V{width}")]), encodings={"x": enc})
    raw = alphabet[rng.integers(0, len(alphabet), (n, width))]
    digits = 0x30 + rng.integers(0, 10, (n, width))
    raw = np.where(rng.random((n, width)) < 0.7, digits, raw).astype(np.uint8)  # valid values are common
    data = raw.tobytes()
    got = lo.AoS(np.frombuffer(data, layout.dtype), layout).to_soa(device=device).to_device("cpu").to_arrow()
    values = got.column("x").to_pylist()
    assert any(v is None for v in values) and any(v is not None for v in values)
    for i, value in enumerate(values):
        cell = data[i * width : (i + 1) * width]
        assert value == _reference(cell, signed, sign), cell
        assert (why_invalid(enc, cell) is None) == (value is not None), cell
