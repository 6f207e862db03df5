"""EBCDIC code pages as lookup tables, generated from codecs (never typed by hand).

Python's own codecs hold cp037, cp273, cp500 and cp1140; the ``ebcdic`` package
(a dependency) registers the others. A table is made the first time a code page is
used, and kept:

* :func:`decode_table`: 256 ``uint32``, one per EBCDIC byte: the character's UTF-8 bytes
  in the low 3 bytes (first byte lowest) and their count in the top byte;
* :func:`encode_table`: 65536 ``int16``, one per BMP code point: its EBCDIC byte, or -1
  where the code page has none (every character of these code pages is in the BMP).

Each table is a bijection between the 256 bytes and 256 characters, so text decodes and
encodes back to the very bytes it came from. The ``ebcdic`` codecs decode two bytes of
the control range, 0x15 (NEL) and 0x25 (LF), to one character, ``"\\n"``, in some code
pages; there the byte their encoder does not produce (0x15) takes the character every
EBCDIC code page gives it, Python's ``cp037`` one (U+0085, NEL): the control range
0x00-0x3F is the same in all of them. :func:`check_bijection` proves the result.
"""

import codecs
import functools

import numpy as np

from ._errors import LayoutError

__all__ = [
    "CODEPAGES",
    "ASCII_CODEPAGES",
    "characters",
    "decode_table",
    "encode_table",
    "byte_of",
    "check_codepage",
    "is_ascii",
]

CODEPAGES = (
    "cp037",
    "cp273",
    "cp277",
    "cp278",
    "cp280",
    "cp284",
    "cp285",
    "cp297",
    "cp500",
    "cp871",
    "cp1047",
) + tuple(f"cp{n}" for n in range(1140, 1150))

# ASCII data (Cobrix's ``encoding=ascii``): text is ASCII, 0x80-0xFF read as ISO-8859-1 (Latin-1), so
# that every byte is one character and comes back to itself; zoned digits are 0x30-0x39, overpunched
# signs '{', 'A'-'I' (positive) and '}', 'J'-'R' (negative), separate signs '+' and '-'; text is padded
# and trimmed with 0x20. "ascii" and "latin-1" are the same table under two names.
ASCII_CODEPAGES = ("ascii", "latin-1")


def is_ascii(name):
    """Whether code page ``name`` is an ASCII one (spaces 0x20, zoned digits 0x30-0x39)."""
    return name in ASCII_CODEPAGES


def check_codepage(name, where):
    """``name`` if it is a supported code page, else a LayoutError naming ``where``."""
    if name not in CODEPAGES and name not in ASCII_CODEPAGES:
        raise LayoutError(
            f"{where}: code page {name!r} is not one layouts has tables for; use one of "
            f"{', '.join(CODEPAGES + ASCII_CODEPAGES)}"
        )
    return name


def _codec(name):
    if name in ASCII_CODEPAGES:
        return codecs.lookup("latin-1")
    try:
        return codecs.lookup(name)
    except LookupError:
        import ebcdic  # noqa: F401 - registers the cp277, cp1047, cp1141... codecs

        return codecs.lookup(name)


@functools.lru_cache(maxsize=None)
def characters(name):
    """The 256 characters of code page ``name``, indexed by EBCDIC byte."""
    codec = _codec(check_codepage(name, "characters"))
    chars = list(codec.decode(bytes(range(256)))[0])
    owner = {}
    for byte, ch in enumerate(chars):
        owner.setdefault(ch, []).append(byte)
    for ch, bytes_ in owner.items():
        if len(bytes_) > 1:
            encoded = codec.encode(ch)[0]
            for byte in bytes_:
                if bytes([byte]) != encoded:
                    chars[byte] = bytes([byte]).decode("cp037")
    return "".join(chars)


@functools.lru_cache(maxsize=None)
def decode_table(name):
    """256 uint32: UTF-8 bytes of each EBCDIC byte's character (low 3 bytes) and their count
    (top byte)."""
    table = np.zeros(256, dtype=np.uint32)
    for byte, ch in enumerate(characters(name)):
        utf8 = ch.encode("utf-8")
        table[byte] = int.from_bytes(utf8, "little") | (len(utf8) << 24)
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=None)
def encode_table(name):
    """65536 int16: the EBCDIC byte of each BMP code point, -1 where there is none."""
    table = np.full(0x10000, -1, dtype=np.int16)
    for byte, ch in enumerate(characters(name)):
        table[ord(ch)] = byte
    table.setflags(write=False)
    return table


def byte_of(name, ch):
    """The EBCDIC byte of character ``ch`` in code page ``name``."""
    return int(encode_table(name)[ord(ch)])


def max_utf8(name):
    """Most UTF-8 bytes one EBCDIC byte of ``name`` becomes."""
    return int((decode_table(name) >> 24).max())


def check_bijection(name):
    """True when the 256 bytes of ``name`` decode to 256 distinct BMP characters that
    encode back to them."""
    chars = characters(name)
    table = encode_table(name)
    return len(set(chars)) == 256 and all(ord(c) < 0x10000 and table[ord(c)] == b for b, c in enumerate(chars))
