"""C declarations -> Layout, with the offsets the C compiler gives.

The pipeline, one module a stage:

1. :mod:`.source` reads a header path or takes declarations as text, and runs the
   system C preprocessor when there is one (``#include``, ``#define``, ``#if``), or a
   small built-in one for text that only has comments, object-like ``#define``
   constants and ``#pragma``.
2. :mod:`.attributes` takes the GNU ``__attribute__((...))`` lists out of the text
   (pycparser does not parse them) and remembers where each one was.
3. :mod:`.program`: pycparser parses the rest; ``Program`` collects typedefs, tags,
   enum constants and the ``#pragma pack`` in force for each struct.
4. :mod:`.types` builds cffi types from the syntax tree. cffi's layout engine (the one
   it uses to talk to C libraries) places every field and bit-field; ``packed``,
   ``aligned`` and ``#pragma pack`` are passed to it.
5. :mod:`.extract` walks the cffi type and writes the NumPy dtype and the
   :class:`~layouts._cinfo.CInfo` (bit-fields, enums, C spellings) of the Layout.
"""

from .._errors import LayoutError
from .attributes import lift_attributes
from .extract import BYTEORDERS, Extract
from .program import Program
from .source import preprocess, read_source
from .types import Types

__all__ = ["from_c", "record_names"]


def from_c(source, name=None, *, byteorder="native", pack=None, unions=None, pointers="error",
           enum_as="dictionary", include_dirs=(), defines=None, preprocessor="auto"):
    """``(dtype, CInfo)`` of a C record, from which :meth:`layouts.Layout.from_c` (which
    documents the options) builds the Layout."""
    if byteorder not in BYTEORDERS:
        raise LayoutError(f"byteorder must be one of {sorted(BYTEORDERS)}, got {byteorder!r}")
    if pointers not in ("error", "int"):
        raise LayoutError(f"pointers must be 'error' or 'int', got {pointers!r}")
    if pack is not None and (not isinstance(pack, int) or pack < 1 or pack & (pack - 1)):
        raise LayoutError(f"pack must be a power of two (1, 2, 4, 8, 16), got {pack!r}")
    program = _parse(source, pack, include_dirs, defines, preprocessor)
    kind, node, label = program.find(name)
    types = Types(program, pointers)
    ctype = types.of_record(kind, node, label)
    return Extract(types, byteorder, dict(unions or {}), label).layout(
        ctype, program.pre.main, enum_as=enum_as)


def record_names(source, *, include_dirs=(), defines=None, preprocessor="auto"):
    """Names of the structs and unions the source itself defines (not its includes), in
    source order, one name per record (its typedef name where it has no tag)."""
    return _parse(source, None, include_dirs, defines, preprocessor).names()


def _parse(source, pack, include_dirs, defines, preprocessor):
    text, filename = read_source(source)
    pre = preprocess(text, filename, preprocessor, include_dirs, defines or {})
    clean, attrs = lift_attributes(pre.text)
    return Program(clean, attrs, pre, pack)
