"""PICTURE strings -> what the item holds: text, a number (digits, scale, sign) or an
edited number (kept as its characters)."""

import re
from dataclasses import dataclass

__all__ = ["Picture", "read_picture"]

_REPEAT = re.compile(r"\(([0-9]+)\)")
_EDIT_SYMBOLS = set("Z*+-.,B0/$") | {"CR", "DB"}
_ALPHA_EDIT = set("B0/")


@dataclass(frozen=True)
class Picture:
    """What a PICTURE describes.

    ``category``: ``"alphanumeric"`` (X, A, or a mix: text), ``"numeric"`` (9, S, V, P:
    a number), ``"edited"`` (a numeric-edited picture: its characters, as printed).
    """

    category: str
    size: int  # character positions (DISPLAY bytes); S counts only when separate
    digits: int = 0  # 9 positions
    scale: int = 0  # digits after the implied point; negative for trailing P
    signed: bool = False


class PictureError(ValueError):
    """A PICTURE string this reader does not understand (the caller names the line)."""


def _symbols(text):
    """The picture's symbols, repeats expanded: ``S9(3)V99`` -> ``['S','9','9','9','V','9','9']``."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith(("CR", "DB"), i):
            out.append(text[i : i + 2])
            i += 2
            continue
        ch = text[i]
        m = _REPEAT.match(text, i + 1)
        if m:
            count = int(m.group(1))
            if count == 0 or count > 1_000_000:
                raise PictureError(f"repeat count ({m.group(1)}) must be 1 to 1000000")
            out.extend([ch] * count)
            i = m.end()
        elif ch == "(":
            raise PictureError("a '(' with no count and ')' after it")
        else:
            out.append(ch)
            i += 1
    return out


def read_picture(text: str) -> Picture:
    """The :class:`Picture` of a PICTURE string (upper case), or a PictureError saying why not."""
    if not text or len(text) > 50:
        raise PictureError("a PICTURE string has 1 to 50 characters")
    symbols = _symbols(text)
    kinds = set(symbols)
    if kinds & {"X", "A"}:
        if kinds - {"X", "A", "9"} - _ALPHA_EDIT:
            raise PictureError(f"{sorted(kinds - {'X', 'A', '9'} - _ALPHA_EDIT)} cannot be mixed with X or A")
        return Picture("alphanumeric", len(symbols))
    if "E" in kinds or "N" in kinds or "G" in kinds or "U" in kinds:
        raise PictureError("floating-point (E), national (N, U) and DBCS (G) pictures are not supported")
    if kinds <= {"9", "S", "V", "P"}:
        return _numeric(symbols)
    unknown = kinds - {"9", "S", "V", "P"} - _EDIT_SYMBOLS
    if unknown:
        raise PictureError(f"{''.join(sorted(unknown))!r} is not a PICTURE symbol")
    if "S" in kinds and (symbols.count("S") > 1 or symbols[0] != "S"):
        raise PictureError("S appears once, first")
    if "9" not in kinds and not kinds & {"Z", "*", "+", "-", "$"}:
        raise PictureError("a picture needs a digit position (9, Z, *, +, -, $)")
    size = sum(2 if s in ("CR", "DB") else 0 if s in ("V", "P", "S") else 1 for s in symbols)
    return Picture("edited", size, digits=symbols.count("9") + symbols.count("Z"))


def _numeric(symbols):
    if symbols.count("S") > 1 or ("S" in symbols and symbols[0] != "S"):
        raise PictureError("S appears once, first")
    if symbols.count("V") > 1:
        raise PictureError("V appears at most once")
    body = [s for s in symbols if s != "S"]
    digits = body.count("9")
    if digits == 0:
        raise PictureError("a numeric picture needs at least one 9")
    positions = [s for s in body if s != "V"]
    first_nine, last_nine = positions.index("9"), len(positions) - 1 - positions[::-1].index("9")
    if "P" in positions[first_nine : last_nine + 1]:
        raise PictureError("P positions go at the left or the right of the 9s, not between them")
    if positions[0] == "P" and positions[-1] == "P":
        raise PictureError("P positions go at one end of the 9s, not at both")
    if positions[0] == "P" and "V" in body and body[0] != "V":
        raise PictureError("with P positions at the left, the V (if any) comes first: VPP9, not PP9V9")
    if positions[-1] == "P" and "V" in body and body[-1] != "V":
        raise PictureError("with P positions at the right, the V (if any) comes last: 9PPV, not 9V9PP")
    if "V" in body:
        point = body.index("V")
    elif positions[0] == "P":
        point = 0
    else:
        point = len(positions)
    right = [s for s in body[point:] if s != "V"]
    left_p = body[:point].count("P")
    if "V" in body and left_p and right.count("P"):
        raise PictureError("P positions on both sides of V")
    return Picture("numeric", digits, digits=digits, scale=len(right) - left_p, signed="S" in symbols)
