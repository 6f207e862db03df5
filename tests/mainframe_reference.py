"""A reference decoder and encoder of mainframe fields: plain Python, slow, obviously
correct. The kernels are property-tested against it (tests/test_mainframe_kinds.py).

Values: ``decimal.Decimal`` (or int with ``as_integer``) for packed, zoned and binary,
``float`` for hfloat (float32 values as the float of their float32), ``str`` for text.
:class:`Invalid` is raised for bytes that are not a value of the encoding; :class:`Range`
for a valid value the Arrow type cannot hold.
"""

import codecs
from decimal import Context, Decimal
from fractions import Fraction

import ebcdic  # noqa: F401 - registers the code pages Python lacks
import numpy as np


class Invalid(Exception):
    pass


class Range(Exception):
    pass


# ------------------------------------------------------------------------ text


def charmap(codepage):
    """256 characters: the codec's, except that where it decodes two bytes to one
    character, the byte its encoder does not give back reads as in cp037."""
    chars = [bytes([b]).decode(codepage) for b in range(256)]
    for b, ch in enumerate(chars):
        if chars.count(ch) > 1 and ch.encode(codepage) != bytes([b]):
            chars[b] = bytes([b]).decode("cp037")
    return chars


def decode_text(enc, raw):
    chars = charmap(enc.codepage)
    if enc.trim in ("right", "both"):
        raw = raw.rstrip(b"\x40")
    if enc.trim == "both":
        raw = raw.lstrip(b"\x40")
    return "".join(chars[b] for b in raw)


def encode_text(enc, text, width):
    chars = charmap(enc.codepage)
    out = bytearray()
    for ch in text:
        if ch not in chars:
            raise Range(f"{ch!r} has no byte in {enc.codepage}")
        out.append(chars.index(ch))
    if len(out) > width:
        raise Range("too long")
    return bytes(out) + b"\x40" * (width - len(out))


# ------------------------------------------------------------------------ decimals


def _finish(enc, sign, digits_text):
    """The value of the digits (a str of 0-9) with the encoding's scale and sign."""
    unscaled = int(digits_text) if digits_text else 0
    if sign < 0:
        unscaled = -unscaled
    if enc.as_integer:
        value = unscaled * 10 ** (-enc.scale)
        if not -(2**63) <= value < 2**63:
            raise Range("beyond int64")
        return value
    return Decimal(unscaled).scaleb(-enc.scale, Context(prec=80))  # (the default context rounds to 28 digits)


POSITIVE_SIGNS = (0xA, 0xC, 0xE, 0xF)  # IBM's valid signs: A, C, E, F plus; B, D minus
NEGATIVE_SIGNS = (0xB, 0xD)


def _sign_of(nibble, signed):
    if nibble in POSITIVE_SIGNS:
        return 1
    if nibble in NEGATIVE_SIGNS and signed:
        return -1
    raise Invalid(f"sign nibble {nibble:X}")


def decode_packed(enc, raw):
    nibbles = []
    for b in raw:
        nibbles += [b >> 4, b & 0xF]
    *digits, sign = nibbles
    if len(digits) > enc.digits and any(d != 0 for d in digits[: len(digits) - enc.digits]):
        raise Invalid("padding nibble")
    if any(d > 9 for d in digits):
        raise Invalid("digit nibble")
    return _finish(enc, _sign_of(sign, enc.signed), "".join(map(str, digits)))


def decode_zoned(enc, raw):
    raw = bytes(raw)
    sign = 1
    plus, minus = "+".encode(enc.codepage), "-".encode(enc.codepage)
    if enc.sign.endswith("separate"):
        sign_byte, raw = (raw[:1], raw[1:]) if enc.sign.startswith("leading") else (raw[-1:], raw[:-1])
        if sign_byte not in (plus, minus):
            raise Invalid("separate sign")
        sign = -1 if sign_byte == minus else 1
        over = None
    else:
        over = 0 if enc.sign.startswith("leading") else len(raw) - 1
    digits = ""
    for i, b in enumerate(raw):
        if i == over:
            sign = _sign_of(b >> 4, enc.signed)
            if b & 0xF > 9:
                raise Invalid("digit")
            digits += str(b & 0xF)
        elif 0xF0 <= b <= 0xF9:
            digits += str(b - 0xF0)
        else:
            raise Invalid("zoned byte")
    return _finish(enc, sign, digits)


def decode_binary(enc, raw):
    value = int.from_bytes(bytes(raw), "big", signed=enc.signed)
    if enc.trunc == "std" and enc.digits and abs(value) >= 10**enc.digits:
        raise Invalid("beyond the PICTURE")
    return _finish(enc, 1 if value >= 0 else -1, str(abs(value)))


def _positive_nibble(enc):
    if enc.positive:
        return int(enc.positive, 16)
    return 0xC if enc.signed else 0xF


def _digits_of(enc, value, ndigits):
    """(negative, the unscaled digits as a str of ndigits) of a value, or Range."""
    unscaled = Fraction(value) * Fraction(10) ** enc.scale
    if unscaled.denominator != 1:
        raise Range("not a whole number of the scale")
    unscaled = int(unscaled)
    if unscaled < 0 and not enc.signed:
        raise Range("negative in an unsigned field")
    if abs(unscaled) >= 10**ndigits:
        raise Range("too many digits")
    return unscaled < 0, str(abs(unscaled)).rjust(ndigits, "0")


def encode_packed(enc, value, width):
    negative, digits = _digits_of(enc, value, enc.digits)
    nibbles = [int(d) for d in digits.rjust(2 * width - 1, "0")] + [0xD if negative else _positive_nibble(enc)]
    return bytes((nibbles[i] << 4) | nibbles[i + 1] for i in range(0, len(nibbles), 2))


def encode_zoned(enc, value, width):
    negative, digits = _digits_of(enc, value, enc.digits)
    body = bytearray(0xF0 | int(d) for d in digits)
    if enc.sign.endswith("separate"):
        sign = ("-" if negative else "+").encode(enc.codepage)
        return sign + bytes(body) if enc.sign.startswith("leading") else bytes(body) + sign
    at = 0 if enc.sign.startswith("leading") else len(body) - 1
    zone = 0xD if negative else _positive_nibble(enc)
    body[at] = (zone << 4) | (body[at] & 0xF)
    return bytes(body)


def encode_binary(enc, value, width):
    unscaled = Fraction(value) * Fraction(10) ** enc.scale
    if unscaled.denominator != 1:
        raise Range("not a whole number of the scale")
    unscaled = int(unscaled)
    if enc.trunc == "std" and enc.digits and abs(unscaled) >= 10**enc.digits:
        raise Range("too many digits")
    try:
        return unscaled.to_bytes(width, "big", signed=enc.signed)
    except OverflowError:
        raise Range("does not fit the width") from None


# ------------------------------------------------------------------------ signs kept
# The way back writes one sign per value: D below zero, else the field's positive sign.
# A value read with another valid sign (C among F, A, B, E, D on zero) comes back with
# the rule's sign, unless its sign is kept (layouts.cobol.keep_signs / put_signs).


def _sign_at(enc, raw):
    """Index of the byte holding the sign (packed: the last; zoned: the overpunched one);
    None for a separate sign."""
    if enc.kind == "packed":
        return len(raw) - 1
    if enc.sign.endswith("separate"):
        return None
    return 0 if enc.sign.startswith("leading") else len(raw) - 1


def sign_held(enc, raw):
    """The sign nibble (packed) or zone (zoned) of a value's bytes; None for a separate sign."""
    at = _sign_at(enc, raw)
    if at is None:
        return None
    return raw[at] & 0xF if enc.kind == "packed" else raw[at] >> 4


def rule_sign(enc, value):
    """The sign the way back writes for ``value``."""
    return 0xD if value < 0 else _positive_nibble(enc)


def with_sign(enc, raw, sign):
    """``raw`` with its sign nibble or zone replaced by ``sign``."""
    out = bytearray(raw)
    at = _sign_at(enc, raw)
    out[at] = (out[at] & 0xF0) | sign if enc.kind == "packed" else (sign << 4) | (out[at] & 0xF)
    return bytes(out)


def signs_for(enc, value):
    """Every valid sign of ``value`` in a field of ``enc``: A, C, E, F for zero and above;
    B, D below zero and (signed fields) on zero."""
    plus, minus = [0xA, 0xC, 0xE, 0xF], [0xB, 0xD]
    if value < 0:
        return minus
    return plus + (minus if enc.signed and value == 0 else [])


# ------------------------------------------------------------------------ IBM floats


def ibm_value(raw):
    """The exact value of IBM hexadecimal float bytes, as a Fraction (and its sign bit)."""
    bits = int.from_bytes(bytes(raw), "big")
    nbits = 8 * len(raw)
    sign = bits >> (nbits - 1)
    exponent = (bits >> (nbits - 8)) & 0x7F
    fraction = bits & ((1 << (nbits - 8)) - 1)
    value = Fraction(fraction, 1 << (nbits - 8)) * Fraction(16) ** (exponent - 64)
    return (-value if sign else value), sign


def _round_to_binary(value, mant_bits, emin, emax):
    """``value`` (a Fraction) rounded to nearest even with ``mant_bits`` significant bits,
    exponents from emin (subnormals below), as a Fraction; Range beyond emax."""
    if value == 0:
        return Fraction(0)
    mag = abs(value)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - mant_bits + 1)
    q, rem = divmod(mag, ulp)
    if rem > ulp / 2 or (rem == ulp / 2 and q % 2 == 1):
        q += 1
    rounded = q * ulp
    if rounded >= Fraction(2) ** (emax + 1):
        raise Range("beyond the float's range")
    return rounded if value > 0 else -rounded


def decode_hfloat(enc, raw):
    value, sign = ibm_value(raw)
    if len(raw) == 4:
        rounded = _round_to_binary(value, 24, -126, 127)
        out = float(np.float32(float(rounded)))
    else:
        rounded = _round_to_binary(value, 53, -1022, 1023)
        out = float(rounded)
    if out == 0 and sign:
        return -0.0
    return out


def encode_hfloat(enc, value, width):
    """float -> IBM bytes: normalized, rounded to nearest even; Range for NaN, infinities
    and values beyond IBM's largest."""
    if value != value or value in (float("inf"), float("-inf")):
        raise Range("NaN or infinity")
    nbits = 8 * width
    fbits = nbits - 8
    sign = 1 if (np.signbit(value)) else 0
    mag = abs(Fraction(value))
    if mag == 0:
        return (sign << (nbits - 1)).to_bytes(width, "big")
    exponent = 0
    while mag >= Fraction(16) ** (exponent - 64):  # smallest e with mag < 16**(e-64)
        exponent += 1
    # normalized: fraction = mag / 16**(exponent-64) in [1/16, 1)
    exponent = max(exponent, 0)
    if width == 8 and mag == Fraction(2) ** 252:  # what IBM's largest longs read as: their way back
        return ((sign << 63) | (1 << 63) - 1).to_bytes(8, "big")
    if exponent > 127:
        raise Range("beyond IBM's largest")
    scaled = mag / Fraction(16) ** (exponent - 64) * (1 << fbits)
    q, rem = divmod(scaled, 1)
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and q % 2 == 1):
        q += 1
    q = int(q)
    if q >> fbits:
        q >>= 4
        exponent += 1
        if exponent > 127:
            raise Range("beyond IBM's largest")
    return ((sign << (nbits - 1)) | (exponent << fbits) | q).to_bytes(width, "big")


DECODERS = {
    "text": decode_text,
    "packed": decode_packed,
    "zoned": decode_zoned,
    "binary": decode_binary,
    "hfloat": decode_hfloat,
}
ENCODERS = {
    "text": encode_text,
    "packed": encode_packed,
    "zoned": encode_zoned,
    "binary": encode_binary,
    "hfloat": encode_hfloat,
}


def decode(enc, raw):
    return DECODERS[enc.kind](enc, bytes(raw))


def encode(enc, value, width):
    return ENCODERS[enc.kind](enc, value, width)


def known_codec(codepage):
    codecs.lookup(codepage)
    return codepage
