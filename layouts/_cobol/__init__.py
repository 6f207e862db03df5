"""COBOL copybooks -> Layout: :func:`read_copybook` reads, parses and lays out one
record; ``Layout.from_copybook`` makes the Layout of it.

Stages, one module each: :mod:`.lexer` (source formats, comments, continuation lines ->
tokens with line numbers), :mod:`.parse` (entries -> the item tree), :mod:`.picture`
(PICTURE strings), :mod:`.layout` (tree -> NumPy dtype, encodings, COBOL facts).
"""

from .layout import CobolField, Copybook, lay_out
from .lexer import read_source, tokenize
from .parse import parse

__all__ = ["CobolField", "Copybook", "read_copybook"]


def read_copybook(src, *, record=None, codepage="cp037", names="cobol", floating_point="ibm", redefines=None,
                  record_start_offset=0, record_end_offset=0, source_format="auto", encoding_extra=None) -> Copybook:
    """Read a copybook (text or path) and lay out one of its records."""
    source = read_source(src)
    roots = parse(tokenize(source, source_format), source)
    return lay_out(roots, source, record=record, codepage=codepage, names=names, floating_point=floating_point,
                   redefines=redefines, record_start_offset=record_start_offset,
                   record_end_offset=record_end_offset, encoding_extra=encoding_extra)
