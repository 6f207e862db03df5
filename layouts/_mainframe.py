"""Messages for mainframe fields the kernels could not convert: which element, which
bytes (hex), why, and the fix. Only used once a kernel has reported a fault."""

import numpy as np

from ._ebcdic import byte_of, encode_table, is_ascii
from .kernels import plan as P

_VALID_SIGNS = "A, C, E, F (positive), B, D (negative, signed fields only)"
NULL_FIX = "or read the field with invalid='null' (Encoding(..., invalid='null')) to make such values nulls"


def _hex(raw):
    return " ".join(f"{b:02X}" for b in raw)


def why_invalid(enc, raw):
    """Why ``raw`` (one element's bytes) is not a value of ``enc``, or None if it is."""
    raw = bytes(raw)
    if raw and all(b == 0 for b in raw) and enc.kind in ("packed", "zoned"):
        return "they are low-values (0x00), not a number"
    if raw and all(b == 0x40 for b in raw) and enc.kind in ("packed", "zoned"):
        return "they are EBCDIC spaces (0x40), not a number"
    if enc.kind == "packed":
        for at, b in enumerate(raw):
            hi, lo = b >> 4, b & 0xF
            if at == 0 and enc.digits % 2 == 0 and hi != 0:
                return f"byte {at} of the field: the padding nibble of an even digit count is {hi:X}, not 0"
            if hi > 9:
                return f"byte {at} of the field: digit nibble {hi:X} is not 0-9"
            if at < len(raw) - 1 and lo > 9:
                return f"byte {at} of the field: digit nibble {lo:X} is not 0-9"
        sign = raw[-1] & 0xF
        if sign < 0xA or (sign in (0xB, 0xD) and not enc.signed):
            what = f"{sign:X} (negative) in an unsigned field" if sign in (0xB, 0xD) else f"{sign:X}"
            return f"the sign nibble is {what}; valid: {_VALID_SIGNS}"
        return None
    if enc.kind == "zoned" and is_ascii(enc.codepage):
        return _why_ascii_zoned(enc, raw)
    if enc.kind == "zoned":
        separate, leading = enc.sign.endswith("separate"), enc.sign.startswith("leading")
        body, first = raw, 0
        if separate:
            at = 0 if leading else len(raw) - 1
            if raw[at] not in (byte_of(enc.codepage, "+"), byte_of(enc.codepage, "-")):
                return (
                    f"byte {at} of the field: the separate sign {raw[at]:02X} is neither '+' nor '-' in {enc.codepage}"
                )
            body, first = (raw[1:], 1) if leading else (raw[:-1], 0)
        over = None if separate else (0 if leading else len(body) - 1)
        for i, b in enumerate(body):
            if i == over:
                zone = b >> 4
                if b & 0xF > 9:
                    return f"byte {first + i} of the field: digit {b & 0xF:X} is not 0-9"
                if zone < 0xA or (zone in (0xB, 0xD) and not enc.signed):
                    what = f"{zone:X} (negative) in an unsigned field" if zone in (0xB, 0xD) else f"{zone:X}"
                    return f"byte {first + i} of the field: the sign zone is {what}; valid: {_VALID_SIGNS}"
            elif not 0xF0 <= b <= 0xF9:
                return f"byte {first + i} of the field: {b:02X} is not a zoned digit (F0-F9)"
        return None
    if enc.kind == "binary":
        value = int.from_bytes(raw, "big", signed=enc.signed)
        if enc.trunc == "std" and enc.digits and abs(value) >= 10**enc.digits:
            return (
                f"the value {value} has more digits than the PICTURE's {enc.digits} (TRUNC(STD)); read it with "
                f"Encoding(..., trunc='bin') if the program wrote the field's whole binary range (COMP-5)"
            )
        return None
    return None


_OVERPUNCH = "{ABCDEFGHI}JKLMNOPQR"  # ASCII overpunched signs: +0..+9, -0..-9


def _why_ascii_zoned(enc, raw):
    """Why ``raw`` is not an ASCII zoned value of ``enc`` (digits 30-39, overpunched signs
    '{', 'A'-'I', '}', 'J'-'R', separate '+'/'-'), or None."""
    if raw and all(b == 0x20 for b in raw):
        return "they are ASCII spaces (0x20), not a number"
    separate, leading = enc.sign.endswith("separate"), enc.sign.startswith("leading")
    first, body = 0, raw
    if separate:
        at = 0 if leading else len(raw) - 1
        if raw[at] not in (0x2B, 0x2D):
            return f"byte {at} of the field: the separate sign {raw[at]:02X} is neither '+' nor '-' in {enc.codepage}"
        body, first = (raw[1:], 1) if leading else (raw[:-1], 0)
    over = None if separate else (0 if leading else len(body) - 1)
    for i, b in enumerate(body):
        if 0x30 <= b <= 0x39:
            continue
        if i == over and chr(b) in _OVERPUNCH:
            if chr(b) in _OVERPUNCH[10:] and not enc.signed:
                return f"byte {first + i} of the field: {chr(b)!r} (a negative sign) in an unsigned field"
            continue
        also = " or an overpunched sign ('{', 'A'-'I', '}', 'J'-'R')" if i == over else ""
        return f"byte {first + i} of the field: {b:02X} is not an ASCII zoned digit (30-39){also}"
    return None


def _element(field, record):
    """``(index, offset within the record, bytes, why)`` of the first element of the field
    in ``record`` (its bytes) that is invalid, or of the first element."""
    found = None
    for k, off in enumerate(field.element_offsets().tolist()):
        raw = record[off : off + field.width]
        why = why_invalid(field.encoding, raw)
        if found is None:
            found = (k, off, raw, why)
        if why is not None:
            return k, off, raw, why
    return found


def forward_message(field, records, fault, where, record_byte, of="of the records"):
    """The text of the ConversionError for a mainframe field: ``where`` names the field
    and record, ``record_byte`` is the byte where the record starts, ``of`` says in what
    (``"of the records"`` converted, ``"of the file"``)."""
    row, _, code = fault
    record = np.frombuffer(records[row : row + 1].tobytes(), dtype=np.uint8).tobytes()
    k, off, raw, why = _element(field, record)
    enc = field.encoding
    element = f"element {k}, " if field.count > 1 else ""
    at = f"{element}byte {record_byte + off} {of} (offset {off} in the record), bytes {_hex(raw)}"
    if code == P.E_INVALID:
        return f"{where}: {at} are not a valid {enc.short()} value: {why or 'invalid bytes'}; fix the data, {NULL_FIX}"
    if enc.kind == "hfloat":
        return (
            f"{where}: {at}: the IBM float is beyond float32's range (about 3.4e38); read it as COMP-2 "
            f"(8 bytes -> float64) if it is one, {NULL_FIX}"
        )
    return (
        f"{where}: {at}: the value does not fit Arrow {field.arrow_type}; read it as decimal128 "
        f"(as_integer=False), {NULL_FIX}"
    )


def reverse_message(field, value, code, where):
    """The text of the ConversionError for a value that cannot be written to a mainframe field."""
    enc = field.encoding
    target = f"field {field.name!r} ({enc.short()}, {field.width} bytes at offset {field.offset})"
    if code == P.E_NULL:
        return (
            f"{where} is null and {target} has no null; fill the nulls first (pyarrow.compute.fill_null) or "
            f"drop those rows"
        )
    if code == P.E_RANGE and field.kind == "text":
        table = encode_table(enc.codepage)
        bad = next((ch for ch in str(value) if ord(ch) > 0xFFFF or table[ord(ch)] < 0), "?")
        return (
            f"{where}: {value!r} holds {bad!r} (U+{ord(bad):04X}), which code page {enc.codepage} has no byte "
            f"for; replace the character, or use a code page that has it (Encoding(codepage=...))"
        )
    if code == P.E_INEXACT:
        return (
            f"{where}: {value!r} is not a multiple of {10**-enc.scale} ({target}: PIC with P scaling); "
            f"round the value to the field's scale"
        )
    if code == P.E_TOO_LONG:
        return f"{where}: {value!r} is longer than {target}; pass truncate=True to cut it to {field.width} characters"
    if code == P.E_UTF:
        return f"{where}: {value!r} is not valid UTF-8 and cannot be written to {target}"
    if enc.kind == "hfloat":
        return (
            f"{where}: {value!r} has no IBM hexadecimal float: NaN and infinities do not exist there, and "
            f"its largest is about 7.2e75; fix the value"
        )
    if enc.kind == "binary":
        limit = (
            f"{enc.digits} digits (TRUNC(STD))"
            if enc.trunc == "std" and enc.digits
            else f"{field.width} bytes{' signed' if enc.signed else ' unsigned'}"
        )
        return f"{where}: {value!r} does not fit {target}: it holds {limit}; fix the value"
    sign = "" if enc.signed else " (unsigned: no negative values)"
    return (
        f"{where}: {value!r} does not fit {target}: it holds {enc.precision(field.width)} digits with "
        f"scale {max(enc.scale, 0)}{sign}; fix the value or widen the PICTURE"
    )
