"""Record types from DWARF debug information -> NumPy dtype + CInfo.

Reads an ELF object, executable or shared library (one the C compiler just made from the
declarations, or one a user built with ``-g``) with pyelftools, indexes its struct, union,
enum and typedef entries, and walks one record type: byte offsets
(``DW_AT_data_member_location``), bit-field positions (``DW_AT_data_bit_offset``, or the
older ``DW_AT_bit_offset``), array bounds, enumerators, typedef chains and byte order
(``DW_AT_endianity``, from ``scalar_storage_order``). The dtype and :class:`CInfo` have the
same shape as the pycparser/cffi path's (:mod:`.extract`), so both build the same Layout.
"""

import io
import os
import sys

import numpy as np

from .._cinfo import CInfo
from .._errors import LayoutError
from .extract import BYTEORDERS, bit_word, check_record, chosen_members
from .program import ambiguous
from .spelling import canonical

_RECORDS = {"DW_TAG_structure_type": "struct", "DW_TAG_union_type": "union", "DW_TAG_class_type": "struct"}
_QUALIFIERS = {
    "DW_TAG_const_type",
    "DW_TAG_volatile_type",
    "DW_TAG_restrict_type",
    "DW_TAG_atomic_type",
    "DW_TAG_immutable_type",
    "DW_TAG_packed_type",
    "DW_TAG_shared_type",
}
_ATE = {
    "DW_ATE_boolean": "b",
    "DW_ATE_float": "f",
    "DW_ATE_complex_float": "c",
    "DW_ATE_signed": "i",
    "DW_ATE_signed_char": "i",
    "DW_ATE_unsigned": "u",
    "DW_ATE_unsigned_char": "u",
    "DW_ATE_UTF": "u",
    "DW_ATE_signed_fixed": None,
    "DW_ATE_unsigned_fixed": None,
    "DW_ATE_decimal_float": None,
}
_SYSTEM = ("/usr/include/", "/usr/lib/", "/usr/local/include/", "/usr/lib64/")


def _name(die):
    attr = die.attributes.get("DW_AT_name")
    if attr is None:
        return None
    value = attr.value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(die, name, default=None):
    attr = die.attributes.get(name)
    if attr is None:
        return default
    value = attr.value
    if isinstance(value, list):  # a DWARF 2 location expression: DW_OP_plus_uconst, ULEB128 n
        if len(value) >= 2 and value[0] == 0x23:
            n, shift = 0, 0
            for byte in value[1:]:
                n |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    return n
        return default
    return value if isinstance(value, int) else default


class Debug:
    """The types of an ELF file's DWARF, indexed by name."""

    def __init__(self, data, source, name_of=None, main=None, compiled_by=None):
        """``data``: the object's bytes, or a binary file object open on it (read by
        sections: only the headers and the debug sections are read, never the whole file).
        ``compiled_by``: ``(compiler, fix)`` where layouts compiled ``source`` itself (its
        messages then speak of the compiler and the declarations, not of rebuilding)."""
        from elftools.common.exceptions import ELFError, ELFParseError
        from elftools.elf.elffile import ELFFile

        self.source, self.main = source, main
        self.name_of = name_of or (lambda path: path if path is not None else source)
        debug_bytes = None
        try:
            stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
            size = stream.seek(0, io.SEEK_END)
            stream.seek(0)
            elf = ELFFile(stream)
            _variant(elf, source)
            if elf.get_section_by_name(".debug_info") is None and elf.get_section_by_name(".zdebug_info") is None:
                if compiled_by is not None:  # GCC writes none for a unit that declares nothing
                    raise LayoutError(
                        f"{source} declares no types: the source defines 0 structs/unions (it is empty, or only "
                        f"comments or macros); pass the header that declares the record, or the declarations "
                        f"as text"
                    )
                raise LayoutError(
                    f"{source} has no DWARF debug information; rebuild it with -g (and keep it: no strip, "
                    f"no -s), or describe the record with Layout.from_c"
                )
            self.little = elf.little_endian
            self.machine = elf["e_machine"]
            debug_bytes = _debug_sections(elf, source, size)
            _type_units(elf, source)
            dwarf = elf.get_dwarf_info()
            self.dies, self.files = {}, {}
            self.tags, self.typedefs, self.records = {}, {}, []
            dwo = None
            for cu in dwarf.iter_CUs():
                top = cu.get_top_DIE()
                named = top.attributes.get("DW_AT_dwo_name") or top.attributes.get("DW_AT_GNU_dwo_name")
                if named is not None and dwo is None:
                    dwo = os.fsdecode(named.value) if isinstance(named.value, bytes) else str(named.value)
                self.files[cu.cu_offset] = self._file_table(dwarf, cu)
                for die in cu.iter_DIEs():
                    self._index(die)
            if dwo is not None and not self.records:
                raise LayoutError(
                    f"{source} was built with -gsplit-dwarf: its types are in the separate file {dwo!r}, which "
                    f"layouts does not read; rebuild it without -gsplit-dwarf, or describe the record with "
                    f"Layout.from_c"
                )
        except LayoutError:  # a TypeError: not to be wrapped below
            raise
        except MemoryError:
            raise LayoutError(_out_of_memory(source, debug_bytes)) from None
        except (ELFError, ELFParseError) as err:
            if compiled_by is not None:
                raise LayoutError(
                    f"the C compiler {compiled_by[0]} wrote an object file for {source} that pyelftools cannot "
                    f"read ({err}): a truncated or damaged ELF file; {compiled_by[1]}"
                ) from None
            raise LayoutError(
                f"{source} is not an ELF object, executable or shared library that pyelftools "
                f"can read ({err}); pass one built with -g"
            ) from None
        except (ValueError, KeyError, IndexError, AssertionError, TypeError, EOFError) as err:
            raise LayoutError(
                f"{source}: its debug information could not be read ({type(err).__name__}: "
                f"{err}); rebuild it with -g, or describe the record with Layout.from_c"
            ) from None

    # ------------------------------------------------------------------ index
    def _file_table(self, dwarf, cu):
        try:
            lp = dwarf.line_program_for_CU(cu)
        except MemoryError:
            raise
        except Exception:  # noqa: BLE001 - a missing or odd line table only costs file names
            lp = None
        if lp is None:
            return [], 1
        dirs = [os.fsdecode(d) if isinstance(d, bytes) else str(d) for d in lp.header.include_directory]
        comp_dir = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
        comp_dir = os.fsdecode(comp_dir.value) if comp_dir and isinstance(comp_dir.value, bytes) else ""
        files = []
        version = lp.header.version
        for entry in lp.header.file_entry:  # as os names files (a name that is not UTF-8 stays itself)
            name = os.fsdecode(entry.name) if isinstance(entry.name, bytes) else str(entry.name)
            index = entry.dir_index
            folder = (
                (dirs[index] if index < len(dirs) else "")
                if version >= 5
                else (dirs[index - 1] if 0 < index <= len(dirs) else comp_dir)
            )
            path = name if os.path.isabs(name) or name.startswith("<") else os.path.join(folder, name)
            if not os.path.isabs(path) and not path.startswith("<") and comp_dir:
                path = os.path.join(comp_dir, path)
            files.append(os.path.normpath(path) if not path.startswith("<") else path)
        return files, 0 if version >= 5 else 1

    def _index(self, die):
        self.dies[die.offset] = die
        tag = die.tag
        if tag in _RECORDS:
            if "DW_AT_declaration" in die.attributes:
                return
            name = _name(die)
            self.records.append(die)
            if name:
                self.tags.setdefault((_RECORDS[tag], name), []).append(die)
        elif tag == "DW_TAG_enumeration_type" and "DW_AT_declaration" not in die.attributes:
            name = _name(die)
            if name:
                self.tags.setdefault(("enum", name), []).append(die)
        elif tag == "DW_TAG_typedef":
            self.typedefs.setdefault(_name(die), []).append(die)

    def file(self, die):
        files, base = self.files.get(die.cu.cu_offset, ([], 1))
        index = _int(die, "DW_AT_decl_file")
        if index is None or not 0 <= index - base < len(files):
            return None
        return files[index - base]

    def where(self, die):
        line, col = _int(die, "DW_AT_decl_line"), _int(die, "DW_AT_decl_column")
        place = self.name_of(self.file(die))
        return place + (f":{line}" if line else "") + (f":{col}" if line and col else "")

    def ref(self, die, name="DW_AT_type"):
        """The entry an attribute refers to (None: void)."""
        attr = die.attributes.get(name)
        if attr is None:
            return None
        offset = (
            attr.value if attr.form in ("DW_FORM_ref_addr", "DW_FORM_GNU_ref_alt") else attr.value + die.cu.cu_offset
        )
        target = self.dies.get(offset)
        if target is None:
            raise LayoutError(
                f"{self.where(die)}: the debug information refers to a type it does not hold "
                f"({attr.form} {attr.value:#x}); rebuild with -g"
            )
        return target

    def strip(self, die):
        """Follow typedefs and qualifiers to the type itself (None: void)."""
        for _ in range(256):
            if die is None or (die.tag not in _QUALIFIERS and die.tag != "DW_TAG_typedef"):
                return die
            die = self.ref(die)
        raise LayoutError(f"{self.where(die)}: a typedef chain longer than 256 links")

    def _in_main(self, die):
        path = self.file(die)
        if self.main is not None:
            return path is not None and os.path.abspath(path) == self.main
        return path is not None and not path.startswith(_SYSTEM) and not path.startswith("<")

    # ------------------------------------------------------------------ names
    def named(self, main_only=True):
        """``{label: record die}`` of the records (main file only by default), in source
        order; a tagless record is known by its typedef name."""
        labels = {}
        seen = set()
        typedef_of = {}
        for tname, dies in self.typedefs.items():
            for td in dies:
                target = self.strip(self.ref(td)) if "DW_AT_type" in td.attributes else None
                if target is not None and target.tag in _RECORDS and not _name(target):
                    typedef_of.setdefault(target.offset, tname)
        for die in self.records:
            if main_only and not self._in_main(die):
                continue
            name = _name(die)
            label = f"{_RECORDS[die.tag]} {name}" if name else typedef_of.get(die.offset)
            if label is None or label in seen:
                continue
            if die.get_parent() is not None and die.get_parent().tag == "DW_TAG_subprogram":
                continue
            seen.add(label)
            labels[label] = die
        return labels

    def find(self, name):
        """``(record die, label)`` of a name: ``"struct tick"``, ``"tick"``, ``"tick_t"``."""
        if name is None:
            named = self.named()
            distinct = {d.offset for d in named.values()}
            if len(distinct) == 1:
                label = next(iter(named))
                return named[label], label
            raise LayoutError(
                f"the source defines {len(distinct)} structs/unions ({', '.join(sorted(named)) or 'none'}); "
                f"pass the name of the one the records hold"
            )
        if not isinstance(name, str):
            raise LayoutError(f"name must be a str such as 'struct tick', got {type(name).__name__}")
        key = " ".join(name.split())
        words = key.split(" ", 1)
        if len(words) == 2 and words[0] in ("struct", "union", "enum"):
            if words[0] == "enum":
                raise LayoutError(f"{name!r} is an enum, not a record; name the struct or union that holds it")
            dies = self._defined(self.tags.get((words[0], words[1]), []))
            if dies:
                return dies[0], key
            return self._not_found(name)
        candidates = {}
        for td in self.typedefs.get(key, []):
            target = self.strip(self.ref(td))
            if target is None or target.tag not in _RECORDS:
                spelled = self.spell(self.ref(td)) if "DW_AT_type" in td.attributes else "void"
                raise LayoutError(
                    f"{self.where(td)}: {key!r} is a typedef of {spelled}, not of a struct or "
                    f"union; name the record type that holds the data"
                )
            if "DW_AT_declaration" in target.attributes:
                target = self._complete(target) or target
            candidates.setdefault(self._identity(target), (target, key))
        for kind in ("struct", "union"):
            for die in self._defined(self.tags.get((kind, key), []))[:1]:
                candidates.setdefault(self._identity(die), (die, f"{kind} {key}"))
        if len(candidates) == 1:
            die, label = next(iter(candidates.values()))
            if "DW_AT_declaration" in die.attributes:
                raise LayoutError(
                    f"{self.where(die)}: {label} is declared but never defined, so its size is "
                    f"unknown; include the header that defines it"
                )
            return die, label
        if candidates:
            raise LayoutError(ambiguous(key, [label for _, label in candidates.values()]))
        return self._not_found(name)

    def _identity(self, die):
        return (die.tag, _name(die), _int(die, "DW_AT_byte_size"), self.file(die), _int(die, "DW_AT_decl_line"))

    def _defined(self, dies):
        main = [d for d in dies if self._in_main(d)]
        return main + [d for d in dies if d not in main]

    def _complete(self, decl):
        name = _name(decl)
        found = self.tags.get((_RECORDS.get(decl.tag, ""), name), []) if name else []
        return found[0] if found else None

    def _not_found(self, name):
        named = self.named()
        everything = self.named(main_only=False)
        more = len(set(everything) - set(named))
        extra = f" (and {more} more from the headers it includes)" if more else ""
        raise LayoutError(
            f"no struct or union named {name!r} in {self.source}; it defines: "
            f"{', '.join(sorted(named)) or 'none'}{extra}"
        )

    # --------------------------------------------------------------- spelling
    def spell(self, die, bits=None):
        """The C type as declared: ``uint32_t``, ``char[16]``, ``struct quote[2]``."""
        dims, stars = "", ""
        for _ in range(256):
            if die is None:
                base = "void"
                break
            tag = die.tag
            if tag in _QUALIFIERS:
                die = self.ref(die)
                continue
            if tag == "DW_TAG_array_type":
                dims += "".join(f"[{n if n is not None else ''}]" for n in self._dims(die))
                die = self.ref(die)
                continue
            if tag == "DW_TAG_pointer_type":
                stars += "*"
                die = self.ref(die)
                continue
            if tag == "DW_TAG_typedef":
                base = _name(die)
            elif tag == "DW_TAG_base_type":
                base = canonical(_name(die) or "?")
            elif tag in _RECORDS or tag == "DW_TAG_enumeration_type":
                kind = "enum" if tag == "DW_TAG_enumeration_type" else _RECORDS[tag]
                base = f"{kind} {_name(die) or '{...}'}"
            elif tag == "DW_TAG_subroutine_type":  # a function pointer: its return type, then (*)()
                ret = self.spell(self.ref(die)) if "DW_AT_type" in die.attributes else "void"
                base, stars = f"{ret} ({stars})()", ""
            else:
                base = tag.replace("DW_TAG_", "")
            break
        else:
            base = "?"
        return f"{base}{stars}{dims}" + (f" :{bits}" if bits is not None else "")

    def _dims(self, array):
        dims = []
        for sub in array.iter_children():
            if sub.tag not in ("DW_TAG_subrange_type", "DW_TAG_enumeration_type"):
                continue
            count = _int(sub, "DW_AT_count")
            if count is None:
                upper = _int(sub, "DW_AT_upper_bound")
                if upper is not None:
                    lower = _int(sub, "DW_AT_lower_bound", 0)
                    # an unsigned all-ones bound is how some compilers write "no elements"
                    count = 0 if upper >= 2**63 else upper - lower + 1
            dims.append(count)
        return dims or [None]

    # ------------------------------------------------------------------ layout
    def layout(
        self, die, label, byteorder="native", unions=None, pointers="error", enum_as="dictionary", alignment=None
    ):
        """``(dtype, CInfo)`` of the record entry ``die``."""
        if byteorder == "native" and self.little != (sys.byteorder == "little"):
            byteorder = "little" if self.little else "big"  # a cross compiler's target order
        walk = _Walk(self, BYTEORDERS[byteorder], dict(unions or {}), label, pointers)
        dtype = walk.record(die, ())
        check_record(dtype, walk.unions, walk.used_unions, label, f"{self.where(die)}: {label}")
        if alignment is None:
            alignment = walk.alignment(die)
        info = CInfo(
            label,
            self.source,
            tuple(walk.ctypes),
            tuple(walk.bits),
            tuple(walk.enums),
            enum_as,
            alignment,
            tuple(walk.notes),
        )
        return dtype, info


class _Walk:
    """One record type's entries -> dtype; C facts go to ctypes/bits/enums/notes."""

    def __init__(self, debug, order, unions, label, pointers):
        self.d, self.order, self.unions, self.label, self.pointers = debug, order, unions, label, pointers
        self.used_unions = set()
        self.ctypes, self.bits, self.enums, self.notes = [], [], [], []
        self.depth = 0

    def record(self, die, path):
        d = self.d
        self.depth += 1
        if self.depth > 200:
            raise LayoutError(f"{d.where(die)}: records nested more than 200 deep")
        if "DW_AT_declaration" in die.attributes:
            die = d._complete(die) or die
            if "DW_AT_declaration" in die.attributes:
                kind = _RECORDS[die.tag]
                raise LayoutError(
                    f"{d.where(die)}: {kind} {_name(die)} is declared but never defined, so its "
                    f"size is unknown; include the header that defines it"
                )
        size = _int(die, "DW_AT_byte_size")
        if size is None:
            raise LayoutError(f"{d.where(die)}: the debug information gives no size for {self.label}")
        if size >= 2**31:
            raise LayoutError(
                f"{d.where(die)}: {self.label} is {size:,} bytes; layouts holds records of up to "
                f"2 GiB: check its array lengths"
            )
        record_name = f"{_RECORDS[die.tag]} {_name(die)}" if _name(die) else self.label
        members = [m for m in die.iter_children() if m.tag == "DW_TAG_member"]
        keep = self._union_keep(members, path) if die.tag == "DW_TAG_union_type" else None
        names, formats, offsets = [], [], []
        for m in members:
            name = _name(m)
            mtype = d.ref(m)
            where = d.where(m)
            offset = _int(m, "DW_AT_data_member_location", 0)
            nbits = _int(m, "DW_AT_bit_size")
            if name is None:
                target = d.strip(mtype)
                if nbits is None and target is not None and target.tag in _RECORDS:
                    sub = self.record(target, path)
                    for n in sub.names:
                        fdt, off = sub.fields[n][:2]
                        names.append(n)
                        formats.append(fdt)
                        offsets.append(offset + off)
                continue
            if keep is not None and name not in keep:
                continue
            leaf = ".".join(path + (name,))
            self.ctypes.append((leaf, d.spell(mtype, nbits)))
            if nbits is not None:
                if nbits == 0:
                    continue
                fmt, off = self.bitfield(leaf, m, mtype, nbits, size, where)
            else:
                fmt, off = self.member(mtype, path + (name,), where, f"{record_name}.{name}"), offset
                if fmt is None:
                    continue
            names.append(name)
            formats.append(fmt)
            offsets.append(off)
        self.depth -= 1
        try:
            return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})
        except (ValueError, TypeError) as err:
            raise LayoutError(f"{d.where(die)}: cannot describe {record_name} as a NumPy dtype: {err}") from None

    def _union_keep(self, members, path):
        member_names = [_name(m) for m in members if _name(m)]
        keys = [".".join(path)] if path else []
        keys += member_names
        return chosen_members(self.unions, self.used_unions, keys, member_names)

    def _order(self, base):
        endian = _int(base, "DW_AT_endianity") if base is not None else None
        if endian == 1:  # DW_END_big
            return ">"
        if endian == 2:  # DW_END_little
            return "<"
        return self.order

    def member(self, mtype, path, where, field):
        """NumPy dtype of a non-bit-field member (None: a zero-length array, no data)."""
        d = self.d
        name = ".".join(path)
        t = d.strip(mtype)
        shape = []
        while t is not None and t.tag == "DW_TAG_array_type":
            dims = d._dims(t)
            if None in dims:
                raise LayoutError(
                    f"{where}: field {field!r} is a flexible array member: it has no fixed size, and records "
                    f"need fixed-size fields; give it a length, or read the variable part separately"
                )
            shape += dims
            t = d.strip(d.ref(t))
        total = int(np.prod(shape, dtype=object)) * (_int(t, "DW_AT_byte_size", 1) or 1) if shape else 0
        if total >= 2**31:
            raise LayoutError(
                f"{where}: array {field!r} is {total:,} bytes; layouts holds records of up to 2 GiB: check its length"
            )
        if shape and 0 in shape:
            self.notes.append(f"field {name!r} ({d.spell(mtype)}) is a zero-length array: no bytes, no column")
            return None
        if t is not None and t.tag in _RECORDS:
            base = self.record(t, path)
        elif t is not None and t.tag == "DW_TAG_base_type" and _name(t) == "char" and shape:
            base, shape = np.dtype(f"S{shape[-1]}"), shape[:-1]
        else:
            base = self.scalar(t, name, where, field)
        return np.dtype((base, tuple(shape))) if shape else base

    def scalar(self, t, name, where, field):
        d = self.d
        if t is None:
            raise LayoutError(f"{where}: field {name!r} has type void, which holds no data")
        if t.tag == "DW_TAG_enumeration_type":
            dtype, enumerators = self.enum(t)
            self.enums.append((name, enumerators))
            return (
                dtype.newbyteorder(self._order(d.strip(d.ref(t)) if "DW_AT_type" in t.attributes else None))
                if dtype.itemsize > 1
                else dtype
            )
        if t.tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type", "DW_TAG_ptr_to_member_type"):
            if self.pointers == "error":
                raise LayoutError(
                    f"{where}: field {field!r} is a pointer: an address in the process that wrote the records, "
                    f"not data; pass pointers='int' to keep it as an unsigned integer column, or remove the field"
                )
            size = _int(t, "DW_AT_byte_size") or t.cu["address_size"]  # clang leaves the size out
            return np.dtype(f"u{size}").newbyteorder(self.order)
        if t.tag != "DW_TAG_base_type":
            raise LayoutError(f"{where}: field {name!r} has type {d.spell(t)}, which holds no data")
        dtype = self.base(t)
        if dtype is None:
            size = _int(t, "DW_AT_byte_size")
            raise LayoutError(
                f"{where}: field {name!r} is {canonical(_name(t) or '?')} ({size} bytes here): no NumPy/Arrow "
                f"type holds it exactly; store it as double, or describe it as char[{size}] to keep the raw bytes"
            )
        if dtype.kind == "S":  # a 128-bit integer: its bytes, as they are in the record
            self.notes.append(
                f"field {name!r} ({canonical(_name(t))}) is kept as its {dtype.itemsize} bytes "
                f"(fixed_size_binary), in the record's byte order"
            )
            return dtype
        return dtype.newbyteorder(self._order(t)) if dtype.itemsize > 1 else dtype

    def base(self, t):
        """NumPy dtype of a base type entry, or None if none holds it exactly."""
        encoding = t.attributes.get("DW_AT_encoding")
        kind = _ATE.get(
            encoding.value
            if encoding is not None and isinstance(encoding.value, str)
            else _ENCODINGS.get(encoding.value if encoding is not None else None)
        )
        size = _int(t, "DW_AT_byte_size", 0)
        if kind == "b":
            return np.dtype("?") if size == 1 else np.dtype(f"u{size}") if size in (2, 4, 8) else None
        if kind == "f":
            return np.dtype(f"f{size}") if size in (2, 4, 8) else None
        if kind == "c":
            return np.dtype(f"c{size}") if size in (8, 16) else None
        if kind in ("i", "u"):
            if size in (1, 2, 4, 8):
                return np.dtype(f"{kind}{size}")
            if size == 16:
                return np.dtype("S16")
        return None

    def enum(self, t):
        d = self.d
        size = _int(t, "DW_AT_byte_size", 4)
        under = d.strip(d.ref(t)) if "DW_AT_type" in t.attributes else None
        raw = []
        for e in t.iter_children():
            if e.tag != "DW_TAG_enumerator":
                continue
            attr = e.attributes.get("DW_AT_const_value")
            value = attr.value if attr is not None else 0
            raw.append((_name(e), value, attr.form if attr is not None else ""))
        signed = None
        if under is not None and under.tag == "DW_TAG_base_type":
            signed = (self.base(under) or np.dtype("i4")).kind == "i"
        if signed is None:
            signed = any(form == "DW_FORM_sdata" and v < 0 for _, v, form in raw)
        names, values = [], []
        for n, v, form in raw:
            if signed and form != "DW_FORM_sdata" and v >= 2 ** (8 * size - 1):
                v -= 2 ** (8 * size)
            names.append(n)
            values.append(v)
        if size not in (1, 2, 4, 8):
            raise LayoutError(f"{d.where(t)}: enum {_name(t) or ''} is {size} bytes, which no integer column holds")
        dtype = np.dtype(f"{'i' if signed else 'u'}{size}")
        table = {}
        for n, v in zip(names, values):
            table.setdefault(v, n)  # an alias keeps the first name of its value
        return dtype, tuple(sorted(table.items()))

    def bitfield(self, leaf, m, mtype, nbits, record_size, where):
        d = self.d
        t = d.strip(mtype)
        if t is not None and t.tag == "DW_TAG_enumeration_type":
            value, _ = self.enum(t)
            order_of = d.strip(d.ref(t)) if "DW_AT_type" in t.attributes else None
        elif t is not None and t.tag == "DW_TAG_base_type":
            value, order_of = self.base(t), t
            if value is None or value.kind in "fcS":
                raise LayoutError(
                    f"{where}: bit-field {leaf!r} has type {d.spell(mtype)}, which layouts cannot "
                    f"read as a bit-field; declare it with an integer type of at most 64 bits"
                )
        else:
            raise LayoutError(f"{where}: bit-field {leaf!r} has type {d.spell(mtype)}")
        p = _int(m, "DW_AT_data_bit_offset")
        if p is None:  # DWARF 2/3: the bits counted from the storage unit's most significant bit
            unit = _int(m, "DW_AT_byte_size", value.itemsize)
            location = _int(m, "DW_AT_data_member_location", 0)
            old = _int(m, "DW_AT_bit_offset", 0)
            if old >= 2**63:  # clang writes a negative offset (a field past its unit) as unsigned
                old -= 2**64
            p = 8 * location + (8 * unit - old - nbits if d.little else old)
        return bit_word(self.bits, leaf, p, nbits, value, record_size, self._order(order_of), where)

    def alignment(self, die):
        """The record's alignment from the debug information alone, for files whose compiler
        is not here: DW_AT_alignment where written (``aligned``, ``_Alignas``), else as the
        compiler derives it: the largest member alignment by the target's ABI, lowered by
        the evidence of packing the offsets give (a member at an offset its type's
        alignment does not divide was packed, to at most the largest power of two dividing
        that offset, and so were the others: ``#pragma pack(n)`` or ``packed``), and by the
        size (a multiple of the alignment). A record packed with no such evidence (every
        member happens to fall where it would anyway) cannot be told apart from DWARF: the
        Layout notes that its alignment is inferred."""
        return self._record_alignment(die, 0)

    def _record_alignment(self, die, depth):
        d = self.d
        explicit = _int(die, "DW_AT_alignment")
        members = []  # (alignment the type would have unpacked, explicit alignment of the member)
        cap = 1 << 16
        for m in die.iter_children():
            if m.tag != "DW_TAG_member" or "DW_AT_bit_size" in m.attributes:
                continue
            offset, mtype = _int(m, "DW_AT_data_member_location", 0), d.ref(m)
            natural, own = self._type_alignment(mtype, depth + 1), _int(m, "DW_AT_alignment")
            if own is None and offset % natural:
                natural = offset & -offset
                inner = d.strip(mtype)
                while inner is not None and inner.tag == "DW_TAG_array_type":
                    inner = d.strip(d.ref(inner))
                if inner is None or inner.tag not in _RECORDS:  # a scalar out of place: the record is packed
                    cap = min(cap, natural)  # (a record out of place may be a packed type in a plain record)
            members.append((natural, own))
        best = 1
        for m in die.iter_children():  # a bit-field's type counts as for any member (unless packed)
            if m.tag == "DW_TAG_member" and "DW_AT_bit_size" in m.attributes and _int(m, "DW_AT_bit_size"):
                best = max(best, min(cap, self._type_alignment(d.ref(m), depth + 1)))
        for natural, own in members:
            best = max(best, own if own is not None else min(cap, natural))
        size = _int(die, "DW_AT_byte_size", 0)
        while size and size % best:
            best //= 2
        return max(best, explicit or 1)

    def _type_alignment(self, t, depth):
        d = self.d
        if depth > 64 or t is None:
            return 1
        if "DW_AT_alignment" in t.attributes:
            return _int(t, "DW_AT_alignment", 1) or 1
        if t.tag == "DW_TAG_array_type" and "DW_AT_GNU_vector" in t.attributes:
            size = _int(t, "DW_AT_byte_size")  # GCC leaves it out: the elements' size times their number
            if size is None:
                element = d.strip(d.ref(t))
                size = (_int(element, "DW_AT_byte_size", 1) or 1) * int(np.prod([n or 1 for n in d._dims(t)]))
            return min(size, 16) if size & (size - 1) == 0 else 1
        if t.tag in _QUALIFIERS or t.tag in ("DW_TAG_typedef", "DW_TAG_array_type"):
            return self._type_alignment(d.ref(t), depth + 1)
        if t.tag in _RECORDS:
            return self._record_alignment(t, depth) if depth < 32 else 1
        if t.tag == "DW_TAG_enumeration_type" and "DW_AT_type" in t.attributes:
            return self._type_alignment(d.ref(t), depth + 1)
        size = _int(t, "DW_AT_byte_size") or (
            t.cu["address_size"] if t.tag in ("DW_TAG_pointer_type", "DW_TAG_reference_type") else 1
        )
        if t.tag == "DW_TAG_base_type" and _ATE.get(self._encoding(t)) == "c":
            size //= 2  # a complex number is aligned as its real part
        if d.machine == "EM_386":
            size = min(size, 4)  # the i386 System V ABI: long long, double, long double in 4
        return min(size, 16) if size & (size - 1) == 0 else 1

    @staticmethod
    def _encoding(t):
        encoding = t.attributes.get("DW_AT_encoding")
        value = encoding.value if encoding is not None else None
        return value if isinstance(value, str) else _ENCODINGS.get(value)


_ENCODINGS = {
    1: "DW_ATE_address",
    2: "DW_ATE_boolean",
    3: "DW_ATE_complex_float",
    4: "DW_ATE_float",
    5: "DW_ATE_signed",
    6: "DW_ATE_signed_char",
    7: "DW_ATE_unsigned",
    8: "DW_ATE_unsigned_char",
    0x10: "DW_ATE_UTF",
}


def _variant(elf, source):
    """Refuse, naming it and the fix, a kind of DWARF that pyelftools cannot read (or
    reads as nothing): GNU-compressed ``.zdebug_*``, ``-fdebug-types-section`` type units
    (DWARF 4's ``.debug_types``, DWARF 5's type units), a GCC LTO object's debug sections."""
    names = [section.name for section in elf.iter_sections()]
    if any(name.startswith(".zdebug") for name in names):
        raise LayoutError(
            f"{source} has its DWARF compressed the old GNU way (.zdebug_* sections: -gz=zlib-gnu, or "
            f"--compress-debug-sections=zlib-gnu), which pyelftools cannot read; rebuild it with -gz=zlib or "
            f"-gz=none, or run `objcopy --decompress-debug-sections {source}`"
        )
    fix = "rebuild it without -fdebug-types-section, or describe the record with Layout.from_c"
    if ".debug_types" in names:
        raise LayoutError(
            f"{source} was built with -fdebug-types-section (DWARF 4 type units, .debug_types), "
            f"which layouts does not read; {fix}"
        )
    if ".debug_info" not in names and any(name.startswith((".gnu.lto_", ".gnu.debuglto_")) for name in names):
        raise LayoutError(
            f"{source} is a GCC LTO object (-flto): its code and debug information are written when it is "
            f"linked; pass the linked program or library, or rebuild the object without -flto (or with "
            f"-ffat-lto-objects), or describe the record with Layout.from_c"
        )


def _type_units(elf, source):
    """Refuse DWARF 5 type units (``-fdebug-types-section``), found from the unit headers
    of every ``.debug_info`` (an object has one per COMDAT group); called once the
    sections' sizes are checked (it reads them)."""
    fix = "rebuild it without -fdebug-types-section, or describe the record with Layout.from_c"
    for info in elf.iter_sections():
        if info.name == ".debug_info" and info["sh_type"] != "SHT_NOBITS":
            _unit_headers(info.data(), "little" if elf.little_endian else "big", source, fix)


def _unit_headers(data, order, source, fix):
    at = 0
    for _ in range(1 << 20):  # unit headers: length, version, and in DWARF 5 the unit type
        if at + 11 > len(data):
            break
        length, head = int.from_bytes(data[at : at + 4], order), 4
        if length == 0xFFFFFFFF:
            length, head = int.from_bytes(data[at + 4 : at + 12], order), 12
        version = int.from_bytes(data[at + head : at + head + 2], order)
        if version >= 5 and at + head + 2 < len(data) and data[at + head + 2] in (0x02, 0x06):  # DW_UT_(split_)type
            raise LayoutError(
                f"{source} was built with -fdebug-types-section (DWARF 5 type units), which "
                f"pyelftools cannot read; {fix}"
            )
        if length == 0:
            break
        at += head + length


#: The DWARF sections pyelftools reads (others, ``.debug_foo``, are never decompressed).
_READ = {
    "info",
    "aranges",
    "abbrev",
    "str",
    "line",
    "frame",
    "loc",
    "ranges",
    "pubtypes",
    "pubnames",
    "addr",
    "str_offsets",
    "line_str",
    "loclists",
    "rnglists",
    "sup",
    "types",
}
#: The most bytes of DWARF read into memory, decompressed: 256 MiB, or 64 times the file's
#: size for a larger file (compressed DWARF is rarely a tenth of its size; a "compression
#: bomb" claims far more).
DWARF_FLOOR, DWARF_RATIO = 256 << 20, 64


def _debug_sections(elf, source, size):
    """The bytes of the file's DWARF sections, ``.debug_*`` and ``.eh_frame`` (what
    pyelftools reads into memory; nothing else of the file is read), after checking that
    each lies inside the file, that none claims bytes the file does not hold (SHT_NOBITS),
    and that, decompressed, they stay under :data:`DWARF_FLOOR` or :data:`DWARF_RATIO`
    times the file's size."""
    total, limit = 0, max(DWARF_FLOOR, DWARF_RATIO * size)
    for section in elf.iter_sections():
        name = section.name
        helper = name.startswith((".rela.debug", ".rel.debug", ".rela.eh_frame", ".rel.eh_frame")) or name in (
            ".symtab",
            ".strtab",
        )  # what relocating the DWARF of an object file reads
        if not (name.startswith((".debug", ".zdebug")) or name == ".eh_frame" or helper):
            continue
        read = helper or name == ".eh_frame" or name.split("_", 1)[-1] in _READ
        start, length = section["sh_offset"], section["sh_size"]
        if section["sh_type"] == "SHT_NOBITS":
            if read and length:
                raise LayoutError(
                    f"{source}: section {name} claims {length:,} bytes but holds none in the file (SHT_NOBITS): "
                    f"a damaged file, or one whose debug information was moved to a separate file (objcopy "
                    f"--only-keep-debug, a .debug file): pass the file that holds it"
                )
            continue
        if start + length > size:
            raise LayoutError(
                f"{source}: section {name} runs past the end of the file ({length:,} bytes at offset "
                f"{start:,}; the file has {size:,}): the file is truncated or damaged; build or copy it again"
            )
        if not read:
            continue
        unpacked = length
        if helper:
            pass
        elif section["sh_flags"] & 0x800:  # SHF_COMPRESSED: the size is in its header
            unpacked = getattr(section, "data_size", length)
        elif name.startswith(".zdebug") and length >= 12:  # GNU: "ZLIB" and the size, big-endian
            elf.stream.seek(start)
            head = elf.stream.read(12)
            if head[:4] == b"ZLIB":
                unpacked = int.from_bytes(head[4:], "big")
        total += unpacked
        if total > limit:
            raise LayoutError(
                f"{source}: its DWARF sections decompress to more than layouts reads ({total:,} bytes so far; "
                f"section {name} alone {unpacked:,} bytes from {length:,} in the file; the limit is "
                f"{limit >> 20:,} MiB: 256 MiB, or 64 times the file's {size:,} bytes): a damaged file or a "
                f"compression bomb; rebuild it with -g (uncompressed: -gz=none), or describe the record with "
                f"Layout.from_c"
            )
    return total


def _out_of_memory(source, debug_bytes):
    held = (
        f" ({debug_bytes / 2**20:,.1f} MiB of DWARF sections, held in memory about twice while they are indexed)"
        if debug_bytes
        else ""
    )
    return (
        f"{source}: out of memory while reading its DWARF debug information{held}; run with more memory "
        f"(or a higher memory limit), or describe the record with Layout.from_c on the header that "
        f"declares it"
    )


def read_file(path):
    """A :class:`Debug` of an object, executable or shared library on disk.

    The file is read through a file object, by sections: its headers and debug sections,
    never the whole file (a 2 GB executable with a few MB of DWARF costs those few MB). A
    FIFO or a device is refused before it is opened. A file that changes while it is read
    (shrinks, is rewritten) is an error saying so, never a crash: nothing is mapped."""
    from .files import open_regular

    shown = os.fspath(path)
    try:
        f = open_regular(
            path,
            "from_dwarf and layouts inspect read an ELF object, executable or shared library "
            "built with -g (prog.o, prog, lib.so): pass the path of that file",
        )
    except OSError as err:
        raise LayoutError(f"cannot read {shown!r}: {err.strerror or err}") from None
    with f:
        try:
            before = os.fstat(f.fileno())
            try:
                if f.read(4) != b"\x7fELF":
                    raise LayoutError(
                        f"{shown} is not an ELF object, executable or shared library; from_dwarf reads "
                        f"files built with -g (prog.o, prog, lib.so); for a C header use Layout.from_c"
                    )
                f.seek(0)
                return Debug(f, shown)
            finally:
                now = os.fstat(f.fileno())
                if (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
                    raise LayoutError(  # the change explains whatever else went wrong
                        f"{shown} changed while it was being read ({before.st_size:,} bytes, now "
                        f"{now.st_size:,}); read it once whatever writes it has finished"
                    ) from None
        except OSError as err:
            raise LayoutError(f"cannot read {shown!r}: {err.strerror or err}") from None
