"""C declarations -> Layout, with the offsets the C compiler gives.

Two paths give the same ``(dtype, CInfo)``:

- **The compiler** (gcc or clang, ``$CC`` honoured), when one is installed:
  :mod:`.compiler` compiles the declarations with debug information and :mod:`.dwarf`
  reads every record type from the object's DWARF. Whatever the compiler accepts is laid
  out exactly as it lays it out. The same reader serves :func:`from_dwarf` for objects,
  executables and shared libraries built with ``-g``.
- **The fallback**, without a compiler (or with ``compiler=None``), one module a stage:

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
     ``aligned``, ``_Alignas`` and ``#pragma pack`` are passed to it.
  5. :mod:`.extract` walks the cffi type and writes the NumPy dtype and the
     :class:`~layouts._cinfo.CInfo` (bit-fields, enums, C spellings) of the Layout.
"""

import dataclasses
import functools
import os
import sys

from .._errors import LayoutError
from .compiler import alignments, check_text, compile_declarations, find_compiler, fingerprint
from .extract import BYTEORDERS
from .files import is_elf

__all__ = ["from_c", "from_dwarf", "record_names", "dwarf_record_names", "is_elf"]

# Whatever bad input could still raise somewhere deep in pycparser, cffi or pyelftools
# (KeyError, SystemError, RecursionError, MemoryError, ELFError...) becomes a LayoutError
# naming the source, never a raw exception.
_RAW = Exception


def _check_options(byteorder, pointers, pack, enum_as="dictionary"):
    if byteorder not in BYTEORDERS:
        raise LayoutError(f"byteorder must be one of {sorted(BYTEORDERS)}, got {byteorder!r}")
    if pointers not in ("error", "int"):
        raise LayoutError(f"pointers must be 'error' or 'int', got {pointers!r}")
    if pack is not None and (
        isinstance(pack, bool) or not isinstance(pack, int) or pack < 1 or pack > 16 or pack & (pack - 1)
    ):
        raise LayoutError(f"pack must be a power of two (1, 2, 4, 8, 16), got {pack!r}")
    if enum_as not in ("dictionary", "int"):
        raise LayoutError(f"enum_as must be 'dictionary' or 'int', got {enum_as!r}")


def _compiler_for(compiler, preprocessor):
    if preprocessor is False:
        if compiler not in ("auto", None, False):
            raise LayoutError(
                "preprocessor=False and a compiler were both asked for; the compiler always "
                "preprocesses: pass compiler=None to use the built-in path without cpp"
            )
        return None
    return find_compiler(compiler)


def _guarded(fn):
    """Turn any raw exception of pycparser, cffi or pyelftools into a LayoutError naming the
    source; a MemoryError says so, with what was being read."""
    dwarf = fn.__name__ in ("from_dwarf", "dwarf_record_names")

    @functools.wraps(fn)
    def run(source, *args, **kwargs):
        try:
            return fn(source, *args, **kwargs)
        except LayoutError:
            raise
        except _RAW as err:
            what = (
                "<string>"
                if isinstance(source, str) and ("\n" in source or ";" in source or "{" in source)
                else str(source)
            )
            if isinstance(err, MemoryError):
                task = "reading its DWARF debug information" if dwarf else "laying out the C declarations"
                raise LayoutError(
                    f"{what}: out of memory while {task}; run with more memory (or a higher memory limit)"
                ) from None
            if isinstance(err, RecursionError):
                raise LayoutError(
                    f"{what}: the declarations nest too deeply to follow; flatten the nesting "
                    f"(a few hundred levels at most)"
                ) from None
            if dwarf:
                raise LayoutError(
                    f"{what}: its debug information could not be read ({type(err).__name__}: {str(err)[:200]}); "
                    f"rebuild it with -g, or describe the record with Layout.from_c"
                ) from None
            raise LayoutError(
                f"{what}: the C declarations could not be laid out ({type(err).__name__}: "
                f"{str(err)[:200]}); check the declaration, or try the other path (compiler=None for "
                f"pycparser/cffi, compiler='auto' with gcc or clang installed)"
            ) from None

    return run


@_guarded
def from_c(
    source,
    name=None,
    *,
    byteorder="native",
    pack=None,
    unions=None,
    pointers="error",
    enum_as="dictionary",
    include_dirs=(),
    defines=None,
    preprocessor="auto",
    compiler="auto",
):
    """``(dtype, CInfo)`` of a C record, from which :meth:`layouts.Layout.from_c` (which
    documents the options) builds the Layout."""
    _check_options(byteorder, pointers, pack, enum_as)
    cc = _compiler_for(compiler, preprocessor)
    if cc is None:
        return _fallback(source, name, byteorder, pack, unions, pointers, enum_as, include_dirs, defines, preprocessor)
    from .source import read_source

    text, filename = read_source(source)
    check_text(text, filename)
    key = _key(cc, text, filename, include_dirs, defines, pack, _sso(byteorder, cc))
    debug = _compiled(key)
    die, label = debug.find(name)
    align = alignments(cc, text, filename, include_dirs, defines, pack, key[-1], [label])[0]
    dtype, info = debug.layout(die, label, byteorder, unions, pointers, enum_as, align)
    if key[-1] is not None:
        # Under -fsso-struct GCC's debug info names the byte-swapped base types, not the
        # typedefs they were declared with: the C spellings come from the plain compile.
        plain = _compiled(key[:-1] + (None,))
        _, spelled = plain.layout(plain.find(name)[0], label, "native", unions, pointers, enum_as, align)
        if [row[0] for row in spelled.ctypes] == [row[0] for row in info.ctypes]:
            info = dataclasses.replace(info, ctypes=spelled.ctypes)
    return dtype, info


def _sso(byteorder, cc):
    """The storage order to ask GCC for (``-fsso-struct``), or None."""
    want = {"little": "little", "big": "big"}.get(byteorder)
    return want if cc.is_gcc and want and want != sys.byteorder else None


def _key(cc, text, filename, include_dirs, defines, pack, sso):
    """The compile cache's key: everything the layout depends on. The main file's text is
    not enough: the fingerprint is the preprocessed text (every included header as it is
    now, found from the current folder and include_dirs as they are now), with the
    compiler and its options; None where preprocessing failed (no caching)."""
    defines = tuple(sorted((defines or {}).items()))
    digest = fingerprint(cc, text, filename, include_dirs, dict(defines), pack, sso)
    return ((cc.path, cc.flags, cc.origin), text, filename, tuple(include_dirs), defines, pack, digest, sso)


def _compiled(key):
    """The indexed debug information of the declarations (cached by :func:`_key`:
    ``layouts inspect`` lays out every record of one header)."""
    if key[-2] is None:
        return _compile(key)
    return _cached(key)


def _compile(key):
    from .compiler import Compiler
    from .dwarf import Debug

    path, text, filename, include_dirs, defines, pack, _, sso = key
    cc = Compiler(*path)
    done = compile_declarations(cc, text, filename, include_dirs, dict(defines), pack, sso)
    return Debug(done.obj, filename, done.name_of, done.main, compiled_by=(cc.label, cc.fix))


_cached = functools.lru_cache(maxsize=8)(_compile)


def _fallback(source, name, byteorder, pack, unions, pointers, enum_as, include_dirs, defines, preprocessor):
    from .extract import Extract
    from .types import Types

    program = _parse(source, pack, include_dirs, defines, preprocessor)
    kind, node, label = program.find(name)
    types = Types(program, pointers)
    ctype = types.of_record(kind, node, label)
    return Extract(types, byteorder, dict(unions or {}), label).layout(ctype, program.pre.main, enum_as=enum_as)


@_guarded
def record_names(source, *, include_dirs=(), defines=None, preprocessor="auto", compiler="auto"):
    """Names of the structs and unions the source itself defines (not its includes), in
    source order, one name per record (its typedef name where it has no tag)."""
    cc = _compiler_for(compiler, preprocessor)
    if cc is None:
        return _parse(source, None, include_dirs, defines, preprocessor).names()
    from .source import read_source

    text, filename = read_source(source)
    check_text(text, filename)
    key = _key(cc, text, filename, include_dirs, defines, None, None)
    named = _compiled(key).named()
    return sorted(named, key=lambda label: _position(named[label]))


def _position(die):
    attrs = die.attributes
    return (
        attrs["DW_AT_decl_line"].value if "DW_AT_decl_line" in attrs else 0,
        attrs["DW_AT_decl_column"].value if "DW_AT_decl_column" in attrs else 0,
    )


def _check_path(path):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise LayoutError(
            f"from_dwarf reads the path of an ELF object, executable or shared library built with -g "
            f"(a str or os.PathLike such as 'prog.o'), got {type(path).__name__}"
        )


@_guarded
def from_dwarf(path, name=None, *, byteorder=None, unions=None, pointers="error", enum_as="dictionary"):
    """``(dtype, CInfo)`` of a record type in the DWARF of an ELF file built with ``-g``."""
    from .dwarf import read_file

    _check_path(path)
    debug = read_file(path)
    if byteorder is None:
        byteorder = "little" if debug.little else "big"
    _check_options(byteorder, pointers, None, enum_as)
    die, label = debug.find(name)
    return debug.layout(die, label, byteorder, unions, pointers, enum_as)


@_guarded
def dwarf_record_names(path):
    """Names of the records of an ELF file's DWARF that come from its own (not system) files."""
    from .dwarf import read_file

    _check_path(path)
    named = read_file(path).named()
    return list(named)


def _parse(source, pack, include_dirs, defines, preprocessor):
    from .attributes import lift_attributes
    from .program import Program
    from .source import preprocess, read_source

    text, filename = read_source(source)
    check_text(text, filename)
    pre = preprocess(text, filename, preprocessor, include_dirs, defines or {})
    clean, attrs = lift_attributes(pre.text)
    return Program(clean, attrs, pre, pack)
