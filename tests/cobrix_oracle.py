"""Helpers of the Cobrix oracle tests: a plain-Python reference decoder of copybook
records (slow, obviously correct), and Cobrix's rendering of values (names, trimming,
nulls, OCCURS DEPENDING ON cut), applied in the tests, not in the library."""

import json
import re
from decimal import Decimal
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "cobrix"


def expected(name):
    """Cobrix's rows: JSON lines, decimals kept exact."""
    return [json.loads(line, parse_float=Decimal) for line in (DATA / name).read_text().splitlines() if line]


# ------------------------------------------------------------------ reference decoder
def _digits_value(digits, negative, scale):
    return Decimal(f"{'-' if negative else ''}{''.join(map(str, digits)) or '0'}E{-scale}")


def decode_packed(raw, enc):
    nibbles = [n for b in raw for n in (b >> 4, b & 15)]
    *digits, sign = nibbles
    if any(d > 9 for d in digits) or sign not in (0xC, 0xD, 0xF) or (sign != 0xF and not enc["signed"] and sign == 0xD):
        return None
    return _digits_value(digits, sign == 0xD, enc["scale"])


def decode_zoned(raw, enc, charset="cp037"):
    ascii_data = charset != "cp037"
    sign_place = enc.get("sign", "trailing")
    negative = False
    body = list(raw)
    if enc["signed"] and sign_place.endswith("separate"):
        sign_byte = body.pop(0) if sign_place.startswith("leading") else body.pop()
        plus, minus = (0x2B, 0x2D) if ascii_data else (0x4E, 0x60)
        if sign_byte not in (plus, minus):
            return None
        negative = sign_byte == minus
    digits = []
    for i, b in enumerate(body):
        zone, digit = b >> 4, b & 15
        at_sign = (
            enc["signed"]
            and not sign_place.endswith("separate")
            and (i == 0 if sign_place.startswith("leading") else i == len(body) - 1)
        )
        if ascii_data:
            if not 0x30 <= b <= 0x39:
                return None
            digits.append(b - 0x30)
            continue
        if digit > 9:
            return None
        if at_sign and zone in (0xC, 0xD):
            negative = zone == 0xD
        elif zone != 0xF:
            return None
        digits.append(digit)
    return _digits_value(digits, negative, enc["scale"])


def decode_binary(raw, enc):
    return Decimal(f"{int.from_bytes(raw, 'big', signed=enc['signed'])}E{-enc['scale']}")


def decode_leaf(raw, enc, dtype, charset):
    if enc is None:  # IEEE float
        return float(np.frombuffer(raw, dtype)[0])
    kind = enc["kind"]
    if kind == "text":
        return raw.decode(charset, errors="replace")
    if kind == "packed":
        return decode_packed(raw, enc)
    if kind == "zoned":
        return decode_zoned(raw, enc, charset)
    if kind == "binary":
        return decode_binary(raw, enc)
    raise AssertionError(kind)


def reference_rows(cb, data, charset="cp037"):
    """Every record of ``data`` decoded field by field from the copybook's dtype,
    nested as ``pyarrow.Table.to_pylist`` nests them."""
    size = cb.dtype.itemsize
    return [_walk(cb.dtype, data[i : i + size], 0, (), cb.encodings, charset) for i in range(0, len(data), size)]


def _walk(dtype, record, base, path, encodings, charset):
    row = {}
    for name in dtype.names:
        fdt, off = dtype.fields[name][:2]
        elem, shape = fdt.subdtype if fdt.subdtype else (fdt, ())
        here = path + (name,)

        def one(at):
            if elem.names is not None:
                return _walk(elem, record, at, here, encodings, charset)
            enc = encodings.get(".".join(here))
            return decode_leaf(bytes(record[at : at + elem.itemsize]), enc, elem, charset)

        if shape:
            assert len(shape) == 1
            row[name] = [one(base + off + k * elem.itemsize) for k in range(shape[0])]
        else:
            row[name] = one(base + off)
    return row


# ------------------------------------------------------------------ Cobrix's rendering
def java_trim(text):
    """``String.trim``: every character <= U+0020 off both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def render(value, *, trim="both", controls=True):
    """A decoded row as Cobrix writes it: ``-`` -> ``_`` in names, strings trimmed, null
    keys left out; control characters as spaces (Cobrix's ``common`` code page)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = render(item, trim=trim, controls=controls)
            if item is None:
                continue
            out[key.replace("-", "_")] = item
        return out
    if isinstance(value, list):
        return [render(v, trim=trim, controls=controls) for v in value]
    if isinstance(value, str):
        if controls:  # Cobrix's EBCDIC tables: spaces; its ASCII reader drops them ("drop")
            value = _CONTROLS.sub("" if controls == "drop" else " ", value)
        return {
            "both": java_trim,
            "none": lambda s: s,
            "right": lambda s: s.rstrip(" "),
            "left": lambda s: s.lstrip(" "),
        }[trim](value)
    return value


def cut_depending(row, counts):
    """Cobrix cuts an ``OCCURS DEPENDING ON`` array to its count: ``counts`` maps a list's
    path to a function of the row giving the count."""
    for path, count_of in counts.items():
        holder = row
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = holder[path[-1]][: int(count_of(row))]
    return row


def edited_number(text, picture):
    """The value of an edited picture's characters (Cobrix decodes them as numbers)."""
    body = text.strip()
    if picture.startswith("S") and body and not body[-1].isdigit():  # Cobrix: S9(n).9(m), sign overpunched
        last = "{ABCDEFGHI}JKLMNOPQR".index(body[-1])
        body = ("-" if last >= 10 else "") + body[:-1] + str(last % 10)
    negative = body.endswith(("-", "CR", "DB")) or body.startswith("-")
    digits = re.sub(r"[^0-9.]", "", body)
    if "V" in picture:
        places = len(
            re.sub(r"\((\d+)\)", lambda m: "9" * (int(m.group(1)) - 1), picture.split("V")[1])
            .rstrip("+-")
            .rstrip("CRDB")
        )
        digits = digits[:-places] + "." + digits[-places:]
    value = Decimal(digits or "0")
    return -value if negative else value


def same(ours, theirs, path=""):
    """Assert two rendered rows are equal (floats as float32 where Cobrix wrote a float)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), path
        assert set(ours) == set(theirs), (path, sorted(set(ours) ^ set(theirs)))
        for key in theirs:
            same(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (path, ours, theirs)
        for i, (a, b) in enumerate(zip(ours, theirs)):
            same(a, b, f"{path}[{i}]")
    elif isinstance(ours, float):
        assert np.float32(ours) == np.float32(float(theirs)) or ours == float(theirs), (path, ours, theirs)
    else:
        assert ours == theirs, (path, ours, theirs)
