"""The item tree -> a NumPy record dtype, the encodings of its fields and the COBOL facts
of each leaf (what :meth:`layouts.Layout.from_copybook` builds the Layout from).

Offsets follow the IBM Enterprise COBOL rules: items follow one another with no gaps;
a group is as long as its items; ``OCCURS n`` (and ``OCCURS m TO n DEPENDING ON``, at its
maximum ``n``) repeats an item n times; a ``REDEFINES`` item starts where the item it
redefines starts (the group is as long as the longest alternative); ``SYNC`` binary and
floating-point items start at a multiple of their size, counted from the start of the
record, after slack bytes.
"""

import math
from dataclasses import dataclass

import numpy as np

from .._errors import LayoutError
from .lexer import Source
from .picture import PictureError, read_picture

__all__ = ["CobolField", "Copybook", "lay_out"]

_MAX_DIGITS = 38  # Arrow decimal128


def _usage_word(item):
    """The USAGE an item has: written on it, or on the group it inherits it from."""
    owner = item
    while owner is not None and not owner.usage_word:
        owner = owner.parent
    if owner is None:
        return "DISPLAY"
    return owner.usage_word if owner is item else f"{owner.usage_word} (from group {owner.name})"


_MAX_RECORD = 2**31 - 1  # NumPy's largest record (and far past any mainframe's)
_MAX_BINARY_DIGITS = 18
_NAMES = ("cobol", "underscore")
_FLOATS = ("ibm", "ieee")
_FILLERS = ("skip", "keep")


@dataclass(frozen=True)
class CobolField:
    """The COBOL facts of one leaf of the Layout (shown by ``layouts inspect``)."""

    path: tuple  # the leaf's path in the Layout
    cobol_name: str
    line: int
    picture: str
    usage: str  # as written ("COMP-3"), "DISPLAY" when none
    kind: str  # "text", "zoned", "packed", "binary", "hfloat", "float" (IEEE), "edited"
    offset: int
    width: int
    shape: tuple
    depending_on: tuple  # per shape dimension: the dotted path of its count field, or ""
    conditions: tuple  # 88 levels: ((name, (values...)), ...)
    sync: bool = False
    blank_when_zero: bool = False
    justified: bool = False
    dims_at: tuple = ()  # per shape dimension: how many names of ``path`` lead to the item with the OCCURS

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class Copybook:
    """A copybook record laid out: ``dtype`` and ``encodings`` go to ``Layout.from_dtype``."""

    record: str
    dtype: np.dtype
    encodings: dict  # dotted leaf path -> Encoding keyword arguments
    fields: tuple  # of CobolField, record order
    source: Source
    # 88 levels of items that are no leaf column: the record (01), groups and FILLERs, in
    # record order: (path (the record's: ()), COBOL name, line, offset, size, conditions)
    group_conditions: tuple = ()


@dataclass
class _Options:
    codepage: str
    names: str
    floating_point: str
    redefines: dict
    encoding_extra: dict
    source: Source


def _rename(name, options):
    return name.replace("-", "_") if options.names == "underscore" else name


def lay_out(
    roots: list,
    source: Source,
    *,
    record=None,
    codepage="cp037",
    names="cobol",
    floating_point="ibm",
    redefines=None,
    record_start_offset=0,
    record_end_offset=0,
    encoding_extra=None,
    fillers="skip",
    occurs_caps=None,
) -> Copybook:
    """Lay out one record of the parsed copybook (``record``: the 01 or group to use).

    ``occurs_caps`` (``{table path: elements}``, private to read_variable and
    write_variable): the OCCURS DEPENDING ON tables at those paths laid out with at most
    that many elements (the most the data holds), not the copybook's maximum."""
    if names not in _NAMES:
        raise LayoutError(f"names must be one of {_NAMES}, got {names!r}")
    if floating_point not in _FLOATS:
        raise LayoutError(f"floating_point must be one of {_FLOATS}, got {floating_point!r}")
    for label, value in (("record_start_offset", record_start_offset), ("record_end_offset", record_end_offset)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise LayoutError(f"{label} must be a whole number of bytes >= 0, got {value!r}")
    if fillers not in _FILLERS:
        raise LayoutError(f"fillers must be one of {_FILLERS}, got {fillers!r}")
    options = _Options(
        codepage, names, floating_point, _redefine_choices(redefines), dict(encoding_extra or {}), source
    )
    top = _choose_record(roots, record, source)
    if fillers == "keep":
        _name_fillers(top)
    builder = _Builder(options, top)
    builder.caps = dict(occurs_caps or {})
    if top.is_group:
        size, dtype = builder.group(top, 0, (), ())
        builder.note_conditions(top, (), 0, size)
    else:
        size, dtype = builder.lone_leaf(top)
    builder.check_choices_used()
    if dtype is None:
        raise LayoutError(f"{source.where(top.line)}: record {top.name} has no fields but FILLER; name one")
    if record_start_offset + size + record_end_offset > _MAX_RECORD:
        raise LayoutError(
            f"record_start_offset={record_start_offset} and record_end_offset={record_end_offset} around the "
            f"{size:,}-byte record {top.name} make records of {record_start_offset + size + record_end_offset:,} "
            f"bytes; a record holds at most {_MAX_RECORD:,} (NumPy's limit): give the bytes each record of the "
            f"file has before and after the copybook's"
        )
    dtype = _shift(dtype, size, record_start_offset, record_end_offset)
    fields = tuple(_moved(f, record_start_offset) for f in builder.fields)
    shift = record_start_offset
    conditions = tuple(
        sorted(
            ((p, n, ln, o + shift, z, c) for p, n, ln, o, z, c in builder.group_conditions), key=lambda g: (g[3], -g[4])
        )
    )
    return Copybook(top.name, dtype, builder.encodings, fields, source, conditions)


def _name_fillers(top):
    """Elementary FILLER items become ``FILLER-1``, ``FILLER-2``... (in record order),
    kept as their raw bytes, so that the way back writes them as they were."""
    number = 0
    for item in _walk([top]):
        if item.is_filler and not item.children and item is not top:
            number += 1
            item.name, item.raw = f"FILLER-{number}", True


def _moved(f, by):
    if not by:
        return f
    return CobolField(**{**f.__dict__, "offset": f.offset + by})


_MAX_RECORD = 2**31 - 1  # bytes of one NumPy record (its itemsize is a C int)


def _shift(dtype, size, start, end):
    """The record with ``start`` bytes before it and ``end`` after it (skipped bytes)."""
    if not start and not end:
        return dtype
    return np.dtype(
        {
            "names": list(dtype.names),
            "formats": [dtype.fields[n][0] for n in dtype.names],
            "offsets": [dtype.fields[n][1] + start for n in dtype.names],
            "itemsize": start + size + end,
        }
    )


def _choose_record(roots, record, source):
    if record is None:
        if len(roots) == 1:
            return roots[0]
        listed = ", ".join(r.name for r in roots)
        raise LayoutError(
            f"{source.origin} describes {len(roots)} records ({listed}); choose one with record='{roots[0].name}'"
        )
    wanted = record.upper().replace("_", "-")
    found = [item for item in _walk(roots) if item.name.upper().replace("_", "-") == wanted]
    if not found:
        listed = ", ".join(i.name for i in _walk(roots) if i.is_group and not i.is_filler)
        raise LayoutError(f"record={record!r}: {source.origin} has no item of that name; its groups are {listed}")
    if len(found) > 1:
        lines = ", ".join(str(i.line) for i in found)
        raise LayoutError(
            f"record={record!r}: {source.origin} has {len(found)} items of that name (lines {lines}); rename one"
        )
    return found[0]


def _walk(items):
    for item in items:
        yield item
        yield from _walk(item.children)


def _redefine_choices(redefines):
    if redefines is None:
        return {}
    if not isinstance(redefines, dict):
        raise LayoutError(
            f"redefines must be a dict {{item: alternative or [alternatives]}}, got {type(redefines).__name__}"
        )
    choices = {}
    for key, value in redefines.items():
        keep = [value] if isinstance(value, str) else value
        if (
            not isinstance(key, str)
            or not isinstance(keep, (list, tuple))
            or not keep
            or not all(isinstance(v, str) for v in keep)
        ):
            raise LayoutError(
                f"redefines={{{key!r}: {value!r}}}: give an item name and the name (or a list of "
                f"names) of the alternatives to keep"
            )
        choices[_canon(key)] = [_canon(v) for v in keep]
    return choices


def _canon(name):
    """Names compare without case, ``-`` and ``_`` alike, on their last dotted part."""
    return name.split(".")[-1].upper().replace("_", "-")


class _Builder:
    """Walks the record once: offsets, dtype, encodings and the facts of each leaf."""

    def __init__(self, options, top):
        self.options, self.top = options, top
        self.fields: list = []
        self.encodings: dict = {}
        self.used_choices: set = set()
        self.counts = {}  # canonical item name -> [Item]
        for item in _walk([top]):
            self.counts.setdefault(_canon(item.name), []).append(item)
        self.paths = {}  # id(item) -> output path
        self.caps = {}  # table path -> elements to lay out (lay_out's occurs_caps)
        self.group_conditions: list = []  # Copybook.group_conditions

    def fail(self, item, why):
        return LayoutError(f"{self.options.source.where(item.line)}: {why}")

    def check_choices_used(self):
        unknown = set(self.options.redefines) - self.used_choices
        if unknown:
            raise LayoutError(
                f"redefines names {sorted(unknown)}, which redefine nothing and are redefined by "
                f"nothing in record {self.top.name}; name an item of a REDEFINES set"
            )

    # -------------------------------------------------------------- groups
    def group(self, item, base, path, inherited):
        """``(size, dtype or None)`` of a group whose first byte is at ``base`` (from the
        record's start); its items are laid out from there."""
        usage = self.usage_of(item, inherited)
        if not item.children:
            raise self.fail(
                item,
                f"{item.name} has neither a PICTURE nor subordinate items: give it a PICTURE "
                f"(PIC X(n), PIC 9(n)...) or items under it, or remove it",
            )
        names, formats, offsets = [], [], []
        seen: set = set()
        end, cursor = 0, 0
        starts = {}  # canonical name of each item laid out here -> its offset in the group
        alternatives = self.alternative_sets(item)
        area: list = []  # the last item that is no REDEFINES, then the items redefining it
        for child in item.children:
            if child.redefines:
                target = _canon(child.redefines)
                if target not in starts:
                    raise self.fail(
                        child,
                        f"{child.name} REDEFINES {child.redefines}, which is not an item before "
                        f"it at the same level in {item.name}",
                    )
                if target not in [_canon(a.name) for a in area]:
                    raise self.fail(child, _not_adjacent(child, area))
                at = starts[target]
                area.append(child)
            else:
                at = cursor
                area = [child]
            child_path = path + (_rename(child.name, self.options),) if not child.is_filler else path
            first, noted = len(self.fields), len(self.group_conditions)
            wanted = at
            size, dtype, at = self.item(child, base, at, child_path, usage)
            if child.redefines and at != wanted:
                raise self.fail(
                    child,
                    f"{child.name} REDEFINES {child.redefines} at byte {base + wanted} of the record, but SYNC "
                    f"aligns {child.name} to byte {base + at}; the item redefined must be aligned for the "
                    f"item redefining it (COBOL): align {child.redefines} too (SYNC, or FILLER before it)",
                )
            starts[_canon(child.name)] = at
            if not child.redefines:
                cursor = at + size
            end = max(end, at + size)
            if dtype is not None and not child.is_filler and not self.kept(child, alternatives):
                self.drop_fields(first)  # an alternative not chosen: its bytes stay, as padding
                del self.group_conditions[noted:]  # (and its groups' 88 levels go with its columns)
                continue
            if dtype is None or child.is_filler:
                continue
            name = child_path[-1]
            if name in seen:
                raise self.fail(
                    child, f"{name} appears twice in group {item.name}; a Layout needs distinct names side by side"
                )
            names.append(name)
            seen.add(name)
            formats.append(dtype)
            offsets.append(at)
        if end > _MAX_RECORD:
            raise self.fail(item, f"group {item.name} is {end} bytes; a record holds {_MAX_RECORD} at most")
        if not names:
            return end, None
        return end, np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": max(end, 1)})

    def drop_fields(self, first):
        for f in self.fields[first:]:
            self.encodings.pop(f.name, None)
        del self.fields[first:]

    def alternative_sets(self, group):
        """``{canonical name: set}`` for every item of a REDEFINES set in this group."""
        sets = {}
        for child in group.children:
            if child.redefines:
                head = _canon(child.redefines)
                members = sets.setdefault(head, [head])
                members.append(_canon(child.name))
                for m in members:
                    sets[m] = members
        return sets

    def kept(self, child, alternatives):
        members = alternatives.get(_canon(child.name))
        if not members:
            return True
        for key in members:
            if key in self.options.redefines:
                self.used_choices.add(key)
                chosen = self.options.redefines[key]
                unknown = [c for c in chosen if c not in members]
                if unknown:
                    raise self.fail(
                        child,
                        f"redefines={{{key!r}: {chosen}}}: {unknown} are not alternatives of this "
                        f"REDEFINES set (alternatives: {members})",
                    )
                return _canon(child.name) in chosen
        return True

    def item(self, child, base, at, path, usage):
        """``(size, dtype, offset)`` of one item of a group (its OCCURS included)."""
        low_high = child.occurs
        if low_high and child.level in (1, 77):
            raise self.fail(child, "OCCURS is not allowed on a 01 or 77 level item")
        if child.is_group:
            at = self.aligned(child, base, at, usage)
            first = len(self.fields)
            size, dtype = self.group(child, base + at, path, usage)
            align = self.max_sync_alignment(first)
            self.note_conditions(child, path, base + at, size)
        else:
            size, dtype, align = self.leaf(child, base, at, path, usage)
            at = self.aligned_leaf(child, base, at, align)
            first = len(self.fields) - (0 if child.is_filler else 1)
            if not child.is_filler:
                self.fields[-1] = CobolField(**{**self.fields[-1].__dict__, "offset": base + at})
        if not low_high:
            return size, dtype, at
        count = low_high[1]
        if align > 1 and size % align:
            size += align - size % align  # slack between occurrences keeps every SYNC item aligned
            if dtype is not None:
                dtype = np.dtype(
                    {
                        "names": list(dtype.names),
                        "formats": [dtype.fields[n][0] for n in dtype.names],
                        "offsets": [dtype.fields[n][1] for n in dtype.names],
                        "itemsize": size,
                    }
                )
        if size * count > _MAX_RECORD:
            raise self.fail(
                child,
                f"OCCURS {count} of {size} bytes makes {size * count} bytes; a record holds {_MAX_RECORD} at most",
            )
        depending = self.counter_path(child) if child.depending_on else ""
        if depending and path in self.caps:
            count = min(count, self.caps[path])
        self.add_dimension(first, count, depending, len(path))
        if count == 0 or dtype is None:
            return size * count, None, at
        return size * count, (dtype, (count,)), at

    def add_dimension(self, first, count, depending, depth):
        """The leaves laid out since ``first`` sit in one more (outer) OCCURS dimension,
        introduced by the item whose path has ``depth`` names."""
        for i in range(first, len(self.fields)):
            f = self.fields[i]
            self.fields[i] = CobolField(
                **{
                    **f.__dict__,
                    "shape": (count,) + f.shape,
                    "depending_on": (depending,) + f.depending_on,
                    "dims_at": (depth,) + f.dims_at,
                }
            )

    def counter_path(self, child):
        found = self.counts.get(_canon(child.depending_on), [])
        if not found:
            raise self.fail(
                child, f"OCCURS DEPENDING ON {child.depending_on}: no item of that name in record {self.top.name}"
            )
        if len(found) > 1:
            raise self.fail(child, f"OCCURS DEPENDING ON {child.depending_on}: {len(found)} items have that name")
        counter = found[0]
        if counter.is_group or counter.occurs:
            raise self.fail(
                child,
                f"OCCURS DEPENDING ON {child.depending_on}: the count must be an elementary item outside any OCCURS",
            )
        path = self.paths.get(id(counter))
        if path is None:
            raise self.fail(
                child, f"OCCURS DEPENDING ON {child.depending_on}: the count must come before the table in the record"
            )
        return ".".join(path)

    def max_sync_alignment(self, first):
        return max([_alignment(f) for f in self.fields[first:] if f.sync] or [1])

    def aligned(self, child, base, at, usage):
        return at

    def aligned_leaf(self, child, base, at, align):
        if align > 1 and (base + at) % align:
            at += align - (base + at) % align
        return at

    def usage_of(self, item, inherited):
        usage = item.usage or inherited
        if inherited and item.usage and item.usage != inherited:
            raise self.fail(item, f"{item.name} has USAGE {item.usage_word}, but a group above it has another usage")
        return usage

    # -------------------------------------------------------------- leaves
    def lone_leaf(self, item):
        size, dtype, _ = self.leaf(item, 0, 0, (_rename(item.name, self.options),), "")
        return size, np.dtype(
            {"names": [_rename(item.name, self.options)], "formats": [dtype], "offsets": [0], "itemsize": size}
        )

    def leaf(self, item, base, at, path, inherited):
        """``(size, dtype, alignment)`` of an elementary item; records its facts."""
        usage = self.usage_of(item, inherited) or "display"
        sync = item.sync or self.group_sync(item)
        kind, width, dtype, encoding = self.classify(item, usage)
        align = width if sync and kind in ("binary", "hfloat", "float") else 1
        name = ".".join(path)
        if encoding is not None:
            encoding = {**encoding, **self.options.encoding_extra.get(kind, {})}
            precision = _precision(encoding, width)
            if precision > _MAX_DIGITS:
                raise self.fail(
                    item,
                    f"PICTURE {item.picture} needs {precision} digits of precision (its digits, its P "
                    f"positions, the byte width's digits for binary read as TRUNC(BIN)); Arrow decimals hold "
                    f"{_MAX_DIGITS} at most; describe it as PIC X({width}) to keep its bytes",
                )
        if encoding is not None and not item.is_filler:
            self.encodings[name] = encoding
        if not item.is_filler:
            self.paths[id(item)] = path
        self.fields.append(
            CobolField(
                path,
                item.name,
                item.line,
                item.picture,
                item.usage_word or "DISPLAY",
                kind,
                base + at,
                width,
                (),
                (),
                tuple((n, tuple(v)) for n, v in item.conditions),
                align > 1,
                item.blank_when_zero,
                item.justified,
            )
        )
        if item.is_filler:
            self.fields.pop()
            self.note_conditions(item, path, base + at, width)
        elif item.raw and item.conditions:  # a FILLER kept as bytes (fillers="keep"): no Encoding holds them
            self.note_conditions(item, path, base + at, width)
        return width, dtype, align

    def note_conditions(self, item, path, offset, size):
        """The 88 levels of an item that is no leaf column (a group, the record, a FILLER)."""
        if item.conditions:
            self.group_conditions.append(
                (
                    tuple(path) if not item.is_filler else tuple(path) + ("FILLER",),
                    item.name,
                    item.line,
                    offset,
                    size,
                    tuple((n, tuple(v)) for n, v in item.conditions),
                )
            )

    def group_sync(self, item):
        parent = item.parent
        while parent is not None:
            if parent.sync:
                return True
            parent = parent.parent
        return False

    def classify(self, item, usage):
        """``(kind, width, dtype, Encoding keywords or None)`` of an elementary item."""
        if item.raw:
            _, width, _, _ = self.classify_cobol(item, usage)
            return "bytes", width, np.dtype(f"V{width}"), None
        return self.classify_cobol(item, usage)

    def classify_cobol(self, item, usage):
        if usage in ("float", "double"):
            if item.picture:
                raise self.fail(
                    item, f"{item.usage_word or 'COMP-1/COMP-2'} items take no PICTURE; remove 'PIC {item.picture}'"
                )
            width = 4 if usage == "float" else 8
            if self.options.floating_point == "ieee":
                return "float", width, np.dtype(f">f{width}"), None
            return "hfloat", width, np.dtype(f"V{width}"), {"kind": "hfloat"}
        if not item.picture:
            raise self.fail(item, f"{item.name} has neither a PICTURE nor subordinate items")
        try:
            pic = read_picture(item.picture)
        except PictureError as err:
            raise self.fail(item, f"PICTURE {item.picture}: {err}") from None
        if pic.category != "numeric" or item.blank_when_zero:
            return self.text(item, usage, pic)
        if pic.digits > _MAX_DIGITS:
            raise self.fail(item, f"PICTURE {item.picture} has {pic.digits} digits; Arrow decimals hold 38 at most")
        numbers = {"digits": pic.digits, "scale": pic.scale, "signed": pic.signed}
        if usage == "display":
            sign = item.sign or "trailing"
            separate = sign.endswith("separate")
            signed = pic.signed or bool(item.sign)  # Cobrix reads a SIGN clause on a PIC without S as signed
            width = pic.size + (1 if separate and signed else 0)
            return (
                "zoned",
                width,
                np.dtype(f"V{width}"),
                {"kind": "zoned", **numbers, "signed": signed, "sign": sign, "codepage": self.options.codepage},
            )
        if item.sign:
            raise self.fail(item, f"SIGN applies to DISPLAY items, not USAGE {item.usage_word}")
        if usage == "packed":
            width = pic.digits // 2 + 1
            return "packed", width, np.dtype(f"V{width}"), {"kind": "packed", **numbers}
        if pic.digits > _MAX_BINARY_DIGITS:
            raise self.fail(
                item,
                f"binary PICTURE {item.picture} has {pic.digits} digits; binary items hold 18 at "
                f"most (IBM COBOL); describe it as PIC X({_wide_binary(pic.digits)}) to keep its "
                f"bytes",
            )
        width = 2 if pic.digits <= 4 else 4 if pic.digits <= 9 else 8
        native = {"trunc": "bin"} if usage == "native" else {}  # COMP-5: the bytes' whole range
        return "binary", width, np.dtype(f"V{width}"), {"kind": "binary", **numbers, **native}

    def text(self, item, usage, pic):
        if usage != "display":
            raise self.fail(item, f"PICTURE {item.picture} is {pic.category}; it cannot be USAGE {_usage_word(item)}")
        if item.sign:
            raise self.fail(item, f"SIGN applies to numeric items, not PICTURE {item.picture}")
        kind = "text" if pic.category == "alphanumeric" else "edited"
        return kind, pic.size, np.dtype(f"V{pic.size}"), {"kind": "text", "codepage": self.options.codepage}


def _not_adjacent(child, area):
    """The message for a REDEFINES whose area is not the one just before it."""
    between = area[0].name if area else "another item"
    return (
        f"{child.name} REDEFINES {child.redefines}, but {between} comes between them; the items that "
        f"redefine an area follow it directly (COBOL), so move {child.name} right after "
        f"{child.redefines} (and the items redefining it)"
    )


def _precision(encoding, width):
    """The decimal precision of a number's Arrow column (as ``layouts.Encoding.precision``,
    which this package sits below): digits, P positions, scale; a binary item read as
    TRUNC(BIN) has its byte width's digits."""
    if encoding["kind"] not in ("packed", "zoned", "binary"):
        return 0
    digits, scale = encoding["digits"], encoding["scale"]
    if encoding["kind"] == "binary" and (encoding.get("trunc") == "bin" or digits == 0):
        digits = len(str(2 ** (8 * width - 1) if encoding["signed"] else 2 ** (8 * width) - 1))
    return max(digits - min(scale, 0), scale, 1)


def _alignment(field):
    return field.width if field.kind in ("binary", "hfloat", "float") else 1


def _wide_binary(digits):
    """Bytes some compilers (and Cobrix) give a binary item of more than 18 digits."""
    return math.ceil((digits * math.log2(10) + 1) / 8)
