"""Open the files the C front end reads (headers, ELF objects) without ever blocking
(:mod:`layouts._regular`), and tell an ELF object from a header."""

from .._errors import LayoutError
from .._regular import kind_of, open_regular

__all__ = ["kind_of", "open_regular", "is_elf"]


def is_elf(path):
    """Whether ``path`` is a regular file that starts as ELF does (``layouts inspect``
    reads those from their DWARF, anything else as a C header). Never blocks: a FIFO or a
    device is not ELF here, and the C path then says what it is."""
    try:
        with open_regular(path, "") as f:
            return f.read(4) == b"\x7fELF"
    except (OSError, ValueError, LayoutError):
        return False
