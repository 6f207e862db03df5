"""COBOL copybooks -> Layout: :func:`read_copybook` reads, parses and lays out one
record; :func:`layout_from_copybook` (``Layout.from_copybook``) makes the Layout of it.

Stages, one module each: :mod:`.lexer` (source formats, comments, continuation lines ->
tokens with line numbers), :mod:`.parse` (entries -> the item tree), :mod:`.picture`
(PICTURE strings), :mod:`.layout` (tree -> NumPy dtype, encodings, COBOL facts).
"""

import json

from .._errors import LayoutError
from .layout import CobolField, Copybook, lay_out
from .lexer import read_source, tokenize
from .metadata import group_rows
from .parse import parse

__all__ = ["CobolField", "Copybook", "encodings_of", "layout_from_copybook", "read_capped", "read_copybook"]

_INVALID = ("error", "null")
_TRIM = ("none", "right", "both")
_TRUNC = ("std", "bin")


def read_copybook(
    src,
    *,
    record=None,
    codepage="cp037",
    names="cobol",
    floating_point="ibm",
    redefines=None,
    record_start_offset=0,
    record_end_offset=0,
    source_format="auto",
    fillers="skip",
) -> Copybook:
    """Read a copybook (text or path) and lay out one of its records."""
    return read_capped(
        src,
        None,
        record=record,
        codepage=codepage,
        names=names,
        floating_point=floating_point,
        redefines=redefines,
        record_start_offset=record_start_offset,
        record_end_offset=record_end_offset,
        source_format=source_format,
        fillers=fillers,
    )


def read_capped(src, occurs_caps, *, source_format="auto", **options) -> Copybook:
    """:func:`read_copybook` with the DEPENDING ON tables of ``occurs_caps`` (``{table
    path: elements}``) laid out with at most that many elements (:func:`lay_out`)."""
    source = read_source(src)
    roots = parse(tokenize(source, source_format), source)
    return lay_out(roots, source, occurs_caps=occurs_caps, **options)


def encodings_of(copybook: Copybook, encoding, *, invalid="error", trim="none", as_integer=False, trunc="std") -> dict:
    """``{leaf path: encoding(...)}`` of the copybook's record (``encoding``: the
    ``layouts.Encoding`` class), with the options that apply to each kind (``as_integer``
    only where the scale is <= 0; ``trunc`` to COMP, COMP-4 and BINARY: COMP-5 is always
    ``"bin"``)."""
    for label, value, allowed in (("invalid", invalid, _INVALID), ("trim", trim, _TRIM), ("trunc", trunc, _TRUNC)):
        if value not in allowed:
            raise LayoutError(f"{label} must be one of {allowed}, got {value!r}")
    if not isinstance(as_integer, bool):
        raise LayoutError(f"as_integer must be True or False, got {as_integer!r}")
    out = {}
    conditions = {f.name: f.conditions for f in copybook.fields if f.conditions}
    for name, keywords in copybook.encodings.items():
        extra = {"invalid": invalid}
        if name in conditions:
            extra["conditions"] = conditions[name]
        kind = keywords["kind"]
        if kind == "text":
            extra["trim"] = trim
        if kind in ("packed", "zoned", "binary") and as_integer and keywords["scale"] <= 0:
            extra["as_integer"] = True
        if kind == "binary" and "trunc" not in keywords:
            extra["trunc"] = trunc
        out[name] = encoding(**{**keywords, **extra})
    return out


def layout_from_copybook(
    from_dtype,
    encoding,
    src,
    *,
    record=None,
    codepage="cp037",
    invalid="error",
    trim="none",
    as_integer=False,
    trunc="std",
    floating_point="ibm",
    redefines=None,
    names="cobol",
    flatten=False,
    source_format="auto",
    record_start_offset=0,
    record_end_offset=0,
    fillers="skip",
    occurs_caps=None,
):
    """The Layout of one copybook record (``from_dtype``: ``Layout.from_dtype``;
    ``encoding``: ``layouts.Encoding``: passed in, since this package sits below them)."""
    copybook = read_capped(
        src,
        occurs_caps,
        record=record,
        codepage=codepage,
        names=names,
        floating_point=floating_point,
        redefines=redefines,
        record_start_offset=record_start_offset,
        record_end_offset=record_end_offset,
        source_format=source_format,
        fillers=fillers,
    )
    encodings = encodings_of(copybook, encoding, invalid=invalid, trim=trim, as_integer=as_integer, trunc=trunc)
    layout = from_dtype(
        copybook.dtype, encodings=encodings, flatten=flatten, void_as="bytes" if fillers == "keep" else "error"
    )
    floats = any(f.dtype.kind == "f" or (f.encoding is not None and f.encoding.kind == "hfloat") for f in layout.fields)
    return layout._with_groups(
        json.dumps(group_rows(copybook.group_conditions)) if copybook.group_conditions else "",
        floating_point if floats else "",
    )
