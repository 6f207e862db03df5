"""CInfo: what a Layout made from C declarations knows beyond its NumPy dtype."""

from dataclasses import dataclass

from ._errors import LayoutError

__all__ = ["CInfo"]


@dataclass(frozen=True)
class CInfo:
    """What a Layout made from C declarations knows beyond its NumPy dtype.

    Every tuple is keyed by leaf name, so the whole is hashable and comparable.
    ``bits`` rows are ``(name, shift, nbits, signed, first_bit, value dtype, byte order)``;
    ``enums`` rows ``(name, ((value, enumerator), ...))``; ``ctypes`` rows
    ``(name, C declaration)``; ``notes`` are remarks on members that got no column (a GNU
    zero-length array) or an unusual mapping (a 128-bit integer kept as its bytes).
    """

    name: str
    source: str = "<string>"
    ctypes: tuple = ()
    bits: tuple = ()
    enums: tuple = ()
    enum_as: str = "dictionary"
    alignment: int = 1
    notes: tuple = ()

    def __post_init__(self):
        if self.enum_as not in ("dictionary", "int"):
            raise LayoutError(f"enum_as must be 'dictionary' or 'int', got {self.enum_as!r}")
