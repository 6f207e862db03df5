"""A record type of a stream description laid out by a COBOL copybook (``copybook =
"x.cob"`` in ``[section.types.NAME]``, see docs/mainframe.md): the copybook's Layout in
place of ``fields``, transposed and written back by the same stream kernels."""

import dataclasses
import functools
import os
import pathlib
import re
from typing import Any

import numpy as np

from .._errors import LayoutError
from .._layout import Layout
from .spec import _COPYBOOK_KEYS as COPYBOOK_KEYS
from .spec import Record, _err, _head_columns


@dataclasses.dataclass(frozen=True)
class CopybookRecord(Record):
    """A record type whose fixed part is ``layout`` (``Layout.from_copybook``); ``source``
    says where it came from (for messages). ``fields`` is empty: the Layout holds them."""

    layout: Any = None
    source: str = ""
    codepage: str = "cp037"

    def tag_bytes(self, text: str, where: str) -> bytes:
        """A string tag's bytes in the type's code page: the letter the user means, as the
        copybook's text holds it ("A" is 0xC1 in cp037, 0x41 with codepage = "ascii")."""
        from .._ebcdic import encode_table

        codes = encode_table(self.codepage)
        raw = [int(codes[ord(ch)]) if ord(ch) < 0x10000 else -1 for ch in text]
        if -1 in raw:
            bad = text[raw.index(-1)]
            raise _err(
                where,
                f"tag {text!r}: {bad!r} has no byte in the type's code page {self.codepage}; give the tag's value as "
                f"an integer (tag = 0xC1 is 'A' in cp037)",
            )
        return bytes(raw)

    def check(self, where: str, order: str, names: "tuple[str, ...]" = ()) -> None:
        if not isinstance(self.layout, Layout):
            raise _err(where, f"expected a Layout from a copybook, got {type(self.layout).__name__}")

    def size(self, order: str) -> int:
        return self.layout.itemsize

    def min_size(self, order: str) -> int:
        return self.layout.itemsize

    def resolve(self, values, where: str, limit: int) -> "CopybookRecord":
        return self

    def plan(self, order: str, prefix: int, with_offset: bool, keep_prefix: bool = False):
        # (88 levels in the key too: a plan keeps its own conditions)
        conditions = tuple(f.encoding.conditions for f in self.layout.fields if f.encoding is not None)
        return _plan(self.layout, prefix, with_offset, keep_prefix, conditions)


@functools.lru_cache(maxsize=64)
def _plan(layout, prefix, with_offset, keep_prefix, conditions=()):
    """As ``spec._plan``: ``_offset`` first, then ``_prefix`` (with ``keep_prefix``), then
    the copybook's record, its bytes copied in one run (the kernels decode its fields)."""
    names, formats, offsets, runs, at = _head_columns(prefix, with_offset, keep_prefix)
    for name in layout.dtype.names:
        fdt, off = layout.dtype.fields[name][:2]
        names.append(name)
        formats.append(fdt)
        offsets.append(at + off)
    runs.append((prefix, at, layout.itemsize))
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": at + layout.itemsize})
    encodings = {f.name: f.encoding for f in layout.fields if f.encoding is not None}
    void = "bytes" if any(f.encoding is None and f.dtype.kind == "V" for f in layout.fields) else "error"
    dense = Layout.from_dtype(dtype, encodings=encodings, void_as=void)
    return dense, tuple(runs), (), 0 if with_offset else -1


def copybook_record(table, where, base_dir):
    """The :class:`CopybookRecord` of a ``[section.types.NAME]`` table with ``copybook``:
    the path relative to ``base_dir`` (the description's directory), the other keys
    ``Layout.from_copybook``'s; errors name the key and the fix."""
    if "fields" in table:
        raise _err(where, 'give fields = [...] or copybook = "x.cob", not both')
    for key in ("text", "decimals"):
        if key in table:
            raise _err(f"{where}.{key}", "applies to fields = [...]; a copybook says how its fields read")
    options = {}
    for key in COPYBOOK_KEYS:
        if key not in table:
            continue
        value = table[key]
        want = bool if key == "as_integer" else str
        if not isinstance(value, want):
            example = "true" if want is bool else '"..."'
            raise _err(
                f"{where}.{key}",
                f"{value!r}; expected {'true or false' if want is bool else 'a string'}, {key} = {example}",
            )
        options[key] = value
    path = options.pop("copybook")
    full = path if os.path.isabs(path) else os.path.join(base_dir or os.getcwd(), path)
    if not os.path.lexists(full):
        raise _err(
            f"{where}.copybook",
            f"{path!r}: no such file ({full}); the path is relative to the description file's directory",
        )
    try:  # (a directory, a FIFO, a device: refused there, never read)
        layout = Layout.from_copybook(pathlib.Path(full), **options)
    except LayoutError as err:  # (its advice in the description's syntax: record = "R", not record='R')
        said = re.sub(r"\b(%s)='([^']*)'" % "|".join(COPYBOOK_KEYS), r'\1 = "\2"', str(err))
        raise _err(f"{where}.copybook", f"{path}: {said}") from None
    return CopybookRecord((), layout=layout, source=path, codepage=options.get("codepage", "cp037"))
