"""A laid-out cffi record type -> NumPy dtype + CInfo (from which Layout.from_c builds the Layout)."""

import platform
import sys

import numpy as np

from .._cinfo import CInfo
from .._errors import LayoutError

BYTEORDERS = {"native": "=", "little": "<", "big": ">"}
_CHAR_SIGNED = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


class Extract:
    """A cffi record type -> NumPy dtype + CInfo."""

    def __init__(self, types, byteorder, unions, label):
        self.t, self.order = types, BYTEORDERS[byteorder]
        self.unions, self.label = unions, label
        self.used_unions = set()
        self.ctypes, self.bits, self.enums, self.notes = [], [], [], []

    def layout(self, ctype, filename, enum_as):
        dtype = self.record(ctype, ())
        check_record(dtype, self.unions, self.used_unions, self.label, self.label)
        info = CInfo(
            self.label,
            filename,
            tuple(self.ctypes),
            tuple(self.bits),
            tuple(self.enums),
            enum_as,
            self.t.b.alignof(ctype),
            tuple(self.notes),
        )
        return dtype, info

    def record(self, ctype, path):
        """Structured dtype of a struct/union; leaves' C facts go to self.ctypes/bits/enums."""
        b = self.t.b
        names, formats, offsets = [], [], []
        keep = self._union_keep(ctype, path) if ctype.kind == "union" else None
        fields = dict(ctype.fields or ())
        for name, _, spelling, where in self.t.members.get(ctype, []):
            field = fields[name]
            if keep is not None and name not in keep and name not in self.t.anonymous:
                continue
            if name in self.t.anonymous:
                sub = self.record(field.type, path)
                for n in sub.names:
                    fdt, off = sub.fields[n][:2]
                    names.append(n)
                    formats.append(fdt)
                    offsets.append(field.offset + off)
                continue
            leaf = ".".join(path + (name,))
            self.ctypes.append((leaf, spelling))
            if field.bitsize >= 0:
                if field.bitsize == 0:
                    continue
                fmt, off = self.bitfield(leaf, field, b.sizeof(ctype), where)
            else:
                fmt, off = self.member(field.type, path + (name,), where), field.offset
                if fmt is None:
                    self.notes.append(f"field {leaf!r} ({spelling}) is a zero-length array: no bytes, no column")
                    continue
            names.append(name)
            formats.append(fmt)
            offsets.append(off)
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": b.sizeof(ctype)})

    def _union_keep(self, ctype, path):
        member_names = [m[0] for m in self.t.members.get(ctype, [])]
        keys = [".".join(path)] if path and not path[-1].startswith("__anonymous_") else []
        keys += [
            ".".join(path[:-1] + (m,)) if path and path[-1].startswith("__anonymous_") else m for m in member_names
        ]
        return chosen_members(self.unions, self.used_unions, keys, member_names)

    def member(self, ctype, path, where):
        """NumPy dtype of a non-bit-field member."""
        name = ".".join(path)
        ctype = self.t.unwrap.get(ctype, ctype)
        shape = []
        while ctype.kind == "array":
            shape.append(ctype.length)
            ctype = self.t.unwrap.get(ctype.item, ctype.item)
        if shape and 0 in shape:
            return None
        if ctype in self.t.special:
            base = self.scalar(ctype, name, where)
        elif ctype.kind in ("struct", "union"):
            base = self.record(ctype, path)
        elif ctype.kind == "primitive" and ctype.cname == "char" and shape:
            base, shape = np.dtype(f"S{shape[-1]}"), shape[:-1]
        else:
            base = self.scalar(ctype, name, where)
        if shape and 0 in shape:
            return None
        return np.dtype((base, tuple(shape))) if shape else base

    def scalar(self, ctype, name, where):
        b = self.t.b
        if ctype in self.t.enums:
            enumerators, dtype = self.t.enums[ctype]
            self.enums.append((name, enumerators))
            return dtype.newbyteorder(self.order) if dtype.itemsize > 1 else dtype
        if ctype in self.t.special:
            dtype, spelled = self.t.special[ctype]
            if dtype is None:
                raise LayoutError(
                    f"{where}: field {name!r} is {spelled} ({b.sizeof(ctype)} bytes here): no NumPy/Arrow type "
                    f"holds it exactly; store it as double, or describe it as char[{b.sizeof(ctype)}] to keep "
                    f"the raw bytes"
                )
            if dtype.kind == "S":
                self.notes.append(
                    f"field {name!r} ({spelled}) is kept as its {dtype.itemsize} bytes "
                    f"(fixed_size_binary), in the record's byte order"
                )
                return dtype
            return dtype.newbyteorder(self.order)
        if ctype in self.t.pointer_types:
            return np.dtype(f"u{b.sizeof(ctype)}").newbyteorder(self.order)
        if ctype.kind != "primitive":
            raise LayoutError(f"{where}: field {name!r} has type {ctype.cname}, which holds no data")
        dtype = _numpy_of(ctype.cname, b.sizeof(ctype))
        if dtype is None:
            raise LayoutError(
                f"{where}: field {name!r} is {ctype.cname} ({b.sizeof(ctype)} bytes here): no NumPy/Arrow "
                f"type holds it exactly; store it as double, or describe it as char[{b.sizeof(ctype)}] "
                f"to keep the raw bytes"
            )
        return dtype.newbyteorder(self.order) if dtype.itemsize > 1 else dtype

    def bitfield(self, leaf, field, record_size, where):
        """Container word dtype and offset of a bit-field; records its CInfo row."""
        b = self.t.b
        value_type = field.type
        if value_type in self.t.enums:
            value = self.t.enums[value_type][1]
        else:
            value = _numpy_of(value_type.cname, b.sizeof(value_type))
        if value is None or value.kind in "fcS":
            raise LayoutError(
                f"{where}: bit-field {leaf!r} has type {value_type.cname}, which layouts cannot read "
                f"as a bit-field; declare it with an integer type of at most 64 bits"
            )
        p = 8 * field.offset + field.bitshift
        return bit_word(self.bits, leaf, p, field.bitsize, value, record_size, self.order, where)


def bit_word(rows, leaf, p, nbits, value, record_size, order, where):
    """Container word dtype and offset of a bit-field whose first bit is ``p`` (counted
    from the record's start); appends its CInfo row to ``rows``.

    GCC allocates bit-fields at the same bit numbers on big-endian targets (and under
    ``scalar_storage_order("big-endian")``); only the numbering differs (bit 0 is then the
    most significant bit of byte 0), which the shift accounts for.
    """
    first_byte, last_byte = p // 8, (p + nbits - 1) // 8
    span = last_byte - first_byte + 1
    # The word the kernels load: a power of two where the record has room, else the
    # exact span (a 3-byte word at the end of a 3-byte record).
    width = next((w for w in (1, 2, 4, 8) if w >= span), None)
    if width is not None and width > record_size:
        width = span
    if width is None or (p % 8) + nbits > 64:
        raise LayoutError(
            f"{where}: bit-field {leaf!r} ({nbits} bits at bit {p % 8} of byte {first_byte}) spans "
            f"{span} bytes; layouts reads bit-fields through one 8-byte word at most"
        )
    start = min(first_byte, record_size - width)
    first = p - 8 * start  # bit offset within the word, in memory order
    big = order == ">" or (order == "=" and sys.byteorder == "big")
    shift = 8 * width - first - nbits if big else first
    signed = value.kind == "i"
    word_order = "|" if width == 1 else ("big" if big else "little")
    rows.append((leaf, shift, nbits, signed, first, value.str if value.kind != "b" else "?", word_order))
    if width not in (1, 2, 4, 8):
        return np.dtype(f"V{width}"), start
    container = np.dtype(f"u{width}")
    return (container.newbyteorder(order) if width > 1 else container), start


def _numpy_of(cname, size):
    """NumPy dtype of a cffi primitive type name, or None if none holds it exactly."""
    if cname == "_Bool":
        return np.dtype("?")
    if cname in ("float", "double"):
        return np.dtype(f"f{size}")
    if cname == "long double":
        return np.dtype("f8") if size == 8 else None
    if cname == "char":
        return np.dtype("i1" if _CHAR_SIGNED else "u1")
    if cname in ("wchar_t", "char16_t", "char32_t"):
        return np.dtype(f"{'i' if cname == 'wchar_t' else 'u'}{size}")
    unsigned = cname.startswith("unsigned") or cname.startswith("uint") or cname in ("size_t", "uintptr_t")
    return np.dtype(f"{'u' if unsigned else 'i'}{size}")


def check_record(dtype, unions, used, label, where):
    """A record's dtype holds data, and every key of ``unions=`` named one of its unions."""
    unknown = set(unions) - used
    if unknown:
        raise LayoutError(f"unions= names {sorted(unknown)}, which are not unions of {label}")
    if not dtype.names:
        raise LayoutError(f"{where} has no fields that hold data")


def chosen_members(unions, used, keys, member_names):
    """The members of a union that ``unions=`` keeps (by the first of ``keys`` it names;
    the key is added to ``used``), or None to keep them all."""
    for key in keys:
        if key in unions:
            used.add(key)
            chosen = unions[key]
            chosen = [chosen] if isinstance(chosen, str) else list(chosen)
            missing = [c for c in chosen if c not in member_names]
            if missing:
                raise LayoutError(f"unions[{key!r}] names {missing}; the union's members are {member_names}")
            return set(chosen)
    return None
