"""Records as long as their ``OCCURS DEPENDING ON`` counts make them (Cobrix's
``variable_size_occurs``): the record type's program for ``kernels.occurs``, the template
record that fills the elements a record does not hold, and the way from and to Arrow.

Reading: :func:`kernels.occurs.scan` finds each record's start and length from its counts,
:func:`kernels.occurs.spread` copies each into a maximum-layout record (the absent
elements from the template: valid zero values), the one-pass transpose decodes those, and
``cut_depending_on`` cuts each table to its count. The way back pads each list to its
maximum with the template's element (:func:`uncut`, checking every list's length against
its count), encodes the maximum-layout records and cuts each to its counts
(:func:`kernels.occurs.measure`, :func:`kernels.occurs.shrink`).
"""

import functools

import numpy as np
import pyarrow as pa

from ._ebcdic import is_ascii
from ._errors import ConversionError, LayoutError
from .kernels import occurs as K

MAX_RECORD_BYTES = 256 << 20  # the largest maximum layout read_variable takes (each record is spread into it)


class Grow(Exception):  # noqa: N818 (not an error: read_variable lays the record out again)
    """A count above its table's cap (the elements the record is laid out with) but within the
    copybook's maximum: ``caps`` are the caps to lay the record out with and read again."""

    def __init__(self, caps, where=""):
        super().__init__(caps)
        self.caps, self.where = caps, where  # (where: the record that asked, for a message)


_STATUS = {
    K.S_SHORT: "the data ends inside the record",
    K.S_COUNT: "the count is outside 0..{most}",
    K.S_BAD_COUNT: "the count's bytes {raw} are not a count",
    K.S_DEEP: f"tables are nested more than {K.DEPTH} deep",
}


class VariableRecord:
    """The program of one copybook record read at the size its counts make it.

    ``book``: ``read_copybook(...)``; ``layout``: ``Layout.from_copybook`` of the same
    record with the same options (not flattened); ``mappings``: ``{table name: {text value:
    count}}`` for tables whose count field is text (Cobrix's ``occurs_mappings``).
    ``maxima``: ``{table path: the copybook's maximum}`` where ``book`` and ``layout`` were
    laid out with fewer elements (``occurs_caps``, the most the data holds: memory and time
    follow the data, not the copybook's maximum); a count above its table's cap and within
    its maximum raises :class:`Grow` (read again with larger caps)."""

    def __init__(self, book, layout, mappings=None, maxima=None):
        from .cobol import depending_tables

        self.book, self.layout = book, layout
        self.mappings = _check_mappings(mappings, book)
        self.size = book.dtype.itemsize
        self.tables = {path: (counter, most) for path, counter, most in depending_tables(book)}
        self.caps = {path: most for path, (_, most) in self.tables.items()} if maxima else None
        self.maxima = {path: (maxima or {}).get(path, most) for path, (_, most) in self.tables.items()}
        if not self.tables:
            raise LayoutError(
                "the record has no OCCURS DEPENDING ON table: every record is the same size; read it as fixed-length "
                "records (Layout.from_copybook)"
            )
        self._fields = {f.name: f for f in book.fields}
        self.count_rows = []  # (table path, counter, most) per row of ``counts``
        self._sizes = {}  # table path -> (element bytes, maximum elements)
        counts, keys, key_counts = [], [], []
        nodes = self._group(book.dtype, (), 0, None, counts, keys, key_counts)
        self.prog = np.array(_flatten(nodes) or [[K.OP_COPY, 0, 0, 0, 0, 0]], dtype=np.int64)
        self.counts = np.array(counts or [[0] * 7], dtype=np.int64).reshape(-1, 7)
        self.keys = np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8).copy()
        self.key_counts = np.array(key_counts or [0], dtype=np.int64)
        if self.size > MAX_RECORD_BYTES:
            self._too_big()
        self.template = _template(layout, self.size)

    def _too_big(self):
        path, (stride, most) = max(self._sizes.items(), key=lambda kv: kv[1][0] * kv[1][1])
        counter = self.tables.get(path, (None,))[0]
        if counter and self.caps:
            raise ConversionError(
                f"the data's counts make the record {self.book.record} {self.size:,} bytes, mostly {'.'.join(path)} "
                f"({most:,} elements of {stride:,} bytes, OCCURS DEPENDING ON {counter}); read_variable takes each "
                f"record through a layout of the most elements the data holds, which may be at most "
                f"{MAX_RECORD_BYTES:,} bytes: fix the counts, or split the data"
            )
        most = self.maxima.get(path, most)
        how = f"OCCURS 0 TO {most} TIMES DEPENDING ON {counter}" if counter else f"OCCURS {most} TIMES"
        raise LayoutError(
            f"the record {self.book.record} is {self.size:,} bytes at its maximum, mostly {'.'.join(path)} ({how}, "
            f"{stride:,} bytes each: {stride * most:,} bytes); read_variable and write_variable take each record through its "
            f"maximum layout, which may be at most {MAX_RECORD_BYTES:,} bytes: lower the "
            f"table's maximum in the copybook to the most elements the data holds"
        )

    # ---------------------------------------------------------------- the program
    def _group(self, dtype, path, at, table, counts, keys, key_counts):
        """Nodes of a group (offsets relative to its start; ``at``: its offset in the record
        with every element 0; ``table``: ``(path, offset)`` of the innermost enclosing table)."""
        variable = []
        fixed = []
        for name in dtype.names:
            fdt, off = dtype.fields[name][:2]
            here = path + (name,)
            elem, shape = fdt.subdtype if fdt.subdtype else (fdt, ())
            if shape and len(shape) != 1:
                raise LayoutError(f"{'.'.join(here)}: a table of {len(shape)} dimensions in one item; not supported")
            size = fdt.itemsize
            if shape:
                inner = (
                    self._group(elem, here, at + off, (here, at + off), counts, keys, key_counts)
                    if elem.names
                    else None
                )
                if here in self.tables or inner:
                    self._sizes[here] = (elem.itemsize, shape[0])
                    row = (
                        self._count_row(here, table, at + off, counts, keys, key_counts) if here in self.tables else -1
                    )
                    body = inner or [("copy", 0, elem.itemsize)]
                    variable.append((off, size, ("table", off, elem.itemsize, shape[0], row, body)))
                    continue
            elif elem.names:
                inner = self._group(elem, here, at + off, table, counts, keys, key_counts)
                if inner:
                    variable.append((off, size, ("group", off, inner)))
                    continue
            fixed.append((off, off + size, here))
        nodes, pos = [], 0
        if not variable:
            return []
        variable.sort(key=lambda v: v[0])
        for off, size, node in variable:
            for start, end, name in fixed:
                if start < off + size and off < end:
                    raise LayoutError(
                        f"{'.'.join(name)} shares bytes with a table whose size depends on its count "
                        f"(REDEFINES over OCCURS DEPENDING ON); with variable-size tables the record "
                        f"cannot be read: read it at its maximum size"
                    )
            if off < pos:
                raise LayoutError("two tables of variable size share bytes (REDEFINES); not supported")
            if off > pos:
                nodes.append(("copy", pos, off - pos))
            if node[0] == "group":
                nodes.extend(_shift(n, off) for n in node[2])
            else:
                nodes.append(node)
            pos = off + size
        if pos < dtype.itemsize:
            nodes.append(("copy", pos, dtype.itemsize - pos))
        return nodes

    def _count_row(self, path, table, offset, counts, keys, key_counts):
        """The row of ``counts`` that reads the count of the table at ``path``."""
        counter, most = self.tables[path]
        where = f"{'.'.join(path)} OCCURS DEPENDING ON {counter}"
        field = self._fields.get(counter)
        if field is None:
            raise LayoutError(f"{where}: {counter} is no elementary item of the record; not supported")
        if not field.shape:
            rel, off = 0, field.offset
        elif table is not None and field.path[: field.dims_at[-1]] == table[0]:
            rel, off = 1, field.offset - table[1]  # in the same element of the enclosing table
        else:
            raise LayoutError(
                f"{where}: the count is inside another table than the one that holds {'.'.join(path)}; not supported"
            )
        if field.offset + field.width > offset:
            raise LayoutError(
                f"{where}: the count is not before the table in the record; a record read at the size its "
                f"counts make it needs each count before its table"
            )
        enc = self.book.encodings.get(counter, {})
        kind, flags = enc.get("kind"), 0
        ascii_ = is_ascii(enc.get("codepage", "cp037"))
        mapping = self.mappings.get(path[-1])
        k0 = nk = 0
        if mapping is not None:
            if kind != "text":
                raise LayoutError(
                    f"occurs_mappings[{path[-1]!r}]: the count {counter} is a {kind} item; a mapping applies to "
                    f"text (PIC X) counts"
                )
            code, k0, nk = K.C_MAPPED, len(key_counts), len(mapping)
            for value, n in mapping.items():
                keys.append(_key_bytes(value, field.width, enc["codepage"], path[-1]))
                key_counts.append(n)
        elif kind == "text":
            code, flags = K.C_DIGITS, K.CF_ASCII if ascii_ else 0
        elif kind == "zoned":
            if enc.get("scale", 0) != 0:
                raise LayoutError(f"{where}: the count has decimal places; a count is a whole number")
            sign = enc.get("sign") or "trailing"
            code = K.C_ZONED
            flags = (
                (K.CF_ASCII if ascii_ else 0)
                | (K.CF_SIGNED if enc.get("signed") else 0)
                | (K.CF_LEADING if sign.startswith("leading") else 0)
                | (K.CF_SEPARATE if sign.endswith("separate") else 0)
            )
        elif kind == "packed":
            code = K.C_PACKED
        elif kind == "binary" and field.width <= 8:
            code, flags = K.C_BINARY, K.CF_SIGNED if enc.get("signed") else 0
        else:
            raise LayoutError(
                f"{where}: a count of kind {kind} cannot be read; counts are numbers (or text with a mapping)"
            )
        counts.append([code, rel, off, field.width, flags, k0, nk])
        self.count_rows.append((path, counter, self.maxima[path]))
        return len(counts) - 1

    # ---------------------------------------------------------------- reading
    def scan(self, data, start=0, end=None, limit=-1, label="the data"):
        """``(starts, lengths)`` of the records of ``data[start:end]`` back to back."""
        end = len(data) if end is None else end
        if not 0 <= start <= end <= len(data):  # (the kernel reads data[start:end] at raw addresses)
            raise ValueError(f"scan: bytes {start}..{end} are not within the data's {len(data)}")
        status, starts, lengths, row, fault = K.scan(
            data, start, end, self.size, self.template, self.prog, self.counts, self.keys, self.key_counts, limit
        )
        if status != K.OK:
            at = int(starts[-1] + lengths[-1]) if len(starts) else start
            self._fail(status, data, len(starts), at, row, fault, label, end)
        return starts, lengths

    def check_framed(self, data, starts, lengths, offsets, label):
        """Each framed record (its body at ``starts``, ``lengths`` in ``data``; ``offsets``:
        its place in the file) exactly as long as its counts make it."""
        i, status, length, row, fault = K.check_framed(
            data, starts, lengths, self.size, self.template, self.prog, self.counts, self.keys, self.key_counts
        )
        if i < 0:
            return
        at = int(offsets[i])  # the RDW's; the body is 4 bytes on
        if status == K.OK:
            raise ConversionError(
                f"{label}: the record at byte {at} is {int(lengths[i])} bytes; its counts make it {int(length)}: fix "
                f"the record (or its RDW)"
            )
        if status == K.S_SHORT:
            raise ConversionError(
                f"{label}: the record at byte {at} is {int(lengths[i])} bytes; its counts make it longer (its bytes "
                f"from byte {at + 4 + int(fault - starts[i])} on are missing): fix the record (or its RDW)"
            )
        self._fail(status, data, int(i), int(starts[i]), row, fault, label, 0, shift=at + 4 - int(starts[i]))

    def spread(self, data, starts, lengths):
        """The records as an ``(n, size)`` uint8 array of the maximum layout."""
        records = np.empty((len(starts), self.size), dtype=np.uint8)
        K.spread(data, starts, lengths, records, self.template, self.prog, self.counts, self.keys, self.key_counts)
        return records

    def _fail(self, status, data, record, at, row, fault, label, end, shift=0):
        """The ConversionError of record ``record``, which starts at byte ``at`` of ``data``
        (``shift`` added to the bytes the message shows: the file's offsets of RDW bodies)."""
        what = f"{label}: record {record} (byte {at + shift})"
        fault += shift
        if status == K.S_SHORT:
            raise ConversionError(
                f"{what}: the data ends inside the record: its bytes from byte {fault} on, which its counts say it "
                f"holds, are past the end (byte {end}); the file is truncated, or a count is wrong: fix the data"
            )
        path, counter, most = self.count_rows[row]
        c = self.counts[row]
        rec = np.empty(self.size, np.uint8)
        rec[:] = self.template
        K.walk(data, rec, at, len(data), rec, self.prog, self.counts, self.keys, self.key_counts, K.M_SPREAD, _stack())
        raw = bytes(rec[c[2] : c[2] + c[3]]) if c[1] == 0 else self._nested_count(rec, row, most)
        shown = f" (bytes {raw.hex(' ').upper()})" if raw is not None else ""
        field = f"the count {counter} of {'.'.join(path)} (OCCURS 0 TO {most} DEPENDING ON {counter})"
        if status == K.S_COUNT:
            value, n = "", None
            if raw is not None:
                one = np.zeros(c[2] + c[3], np.uint8)
                one[c[2] :] = np.frombuffer(raw, np.uint8)
                n = int(K.read_count(one, 0, row, self.counts, self.keys, self.key_counts)[1])
                if c[0] == K.C_BINARY and not c[4] & K.CF_SIGNED and n < 0:  # unsigned: its 64 bits' value
                    n += 1 << 64
                value = f" {n}"
            cap = self.caps[path] if self.caps else most
            if cap < most and (n is None or cap < n <= most):  # within the maximum: lay it out larger, read again
                raise Grow({**self.caps, path: min(most, max(2 * cap, n or 0))}, what)
            raise ConversionError(
                f"{what}: {field} is{value}{shown}, outside 0..{most}, for its table at byte {fault}; fix the "
                f"record, or the copybook's maximum"
            )
        if status == K.S_BAD_COUNT:
            mapping = self.mappings.get(path[-1])
            why = f"no key of occurs_mappings[{path[-1]!r}] ({sorted(mapping)})" if mapping else "not a whole number"
            if not mapping and self.book.encodings.get(counter, {}).get("kind") == "text":
                why += f" (a text count's values can be mapped to counts: occurs_mappings={{{path[-1]!r}: {{text: count}}}})"
            raise ConversionError(f"{what}: {field}{shown} is {why}, for its table at byte {fault}; fix the record")
        raise ConversionError(f"{what}: {_STATUS[status]}")

    def _nested_count(self, rec, row, most):
        """The bytes of a count inside a table (count ``row``) that is not a count of
        0..``most``: the first element's whose is not, in ``rec`` as the walk that failed
        left it (the elements after it hold the template's valid zeros); None if none."""
        c = self.counts[row]
        field = next((f for f in self.layout.fields if f.name == self.count_rows[row][1]), None)
        if field is None:
            return None
        one = np.zeros(c[2] + c[3], np.uint8)
        for at in np.asarray(field.element_offsets(), np.int64).reshape(-1):
            one[c[2] :] = rec[at : at + c[3]]
            ok, n = K.read_count(one, 0, row, self.counts, self.keys, self.key_counts)
            if not ok or not 0 <= n <= most:
                return bytes(rec[at : at + c[3]])
        return None

    def offset_in_record(self, rec, target):
        """The byte of the record (as the data holds it) that ``target``, a byte of the
        maximum-layout record ``rec`` (spread from it), came from; None if the record does
        not hold it (an element past its count, taken from the template)."""

        def run(pc, stop, base, at):
            while pc < stop:
                op, off, size, most, row, body = (int(v) for v in self.prog[pc])
                if op == K.OP_COPY:
                    if base + off <= target < base + off + size:
                        return True, at + target - base - off
                    at += size
                    pc += 1
                    continue
                count = most
                if row >= 0:
                    count = int(K.read_count(rec, base, row, self.counts, self.keys, self.key_counts)[1])
                for k in range(max(0, min(count, most))):
                    found, at = run(pc + 1, pc + 1 + body, base + off + k * size, at)
                    if found:
                        return True, at
                pc += 1 + body
            return False, at

        found, at = run(0, len(self.prog), 0, 0)
        return at if found else None

    # ---------------------------------------------------------------- the way back
    def shrink(self, records):
        """The maximum-layout records (``(n, size)`` uint8) cut to their counts, back to back."""
        status, lengths, row, record = K.measure(records, self.prog, self.counts, self.keys, self.key_counts)
        if status != K.OK:
            path, counter, most = self.count_rows[row]
            raise ConversionError(
                f"row {record}: the count {counter} of {'.'.join(path)} is not a count in 0..{most}; fix the value"
            )
        out = np.empty(int(lengths.sum()), dtype=np.uint8)
        K.shrink(records, lengths, out, self.prog, self.counts, self.keys, self.key_counts)
        return out, lengths


def _stack():
    return np.empty((6, K.DEPTH), np.int64)


def _shift(node, by):
    if node[0] == "copy":
        return ("copy", node[1] + by, node[2])
    return ("table", node[1] + by, *node[2:])


def _flatten(nodes):
    rows = []
    for node in nodes:
        if node[0] == "copy":
            if node[2]:
                rows.append([K.OP_COPY, node[1], node[2], 0, 0, 0])
            continue
        _, off, stride, most, row, body = node
        inner = _flatten(body)
        rows.append([K.OP_TABLE, off, stride, most, row, len(inner)])
        rows.extend(inner)
    return rows


def _check_mappings(mappings, book):
    if mappings is None:
        return {}
    if not isinstance(mappings, dict) or not all(isinstance(m, dict) for m in mappings.values()):
        raise LayoutError(f"occurs_mappings must be {{table name: {{text value: count}}}}, got {mappings!r}")
    names = {p[-1] for f in book.fields for p in [f.path[:d] for d in f.dims_at]}
    out = {}
    for name, mapping in mappings.items():
        key = str(name).upper().replace("_", "-")
        if key not in names:
            raise LayoutError(
                f"occurs_mappings: {name!r} is no table of the record (its tables: {', '.join(sorted(names))})"
            )
        seen = {}
        for value, n in mapping.items():
            if not isinstance(value, str) or not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 2**31:
                raise LayoutError(
                    f"occurs_mappings[{name!r}]: {value!r}: {n!r}: give text values and counts >= 0 (a table's "
                    f"maximum at most, which is below 2**31)"
                )
            if value.rstrip(" ") in seen:  # a count's text is compared without its trailing spaces
                raise LayoutError(
                    f"occurs_mappings[{name!r}]: {seen[value.rstrip(' ')]!r} and {value!r} are the same text (trailing "
                    f"spaces do not count); give each text one count"
                )
            seen[value.rstrip(" ")] = value
        out[key] = mapping
    return out


def _key_bytes(value, width, codepage, table):
    from ._ebcdic import encode_table

    codes = encode_table(codepage)
    raw = [int(codes[ord(ch)]) if ord(ch) < 0x10000 else -1 for ch in value]
    if -1 in raw or len(raw) > width:
        raise LayoutError(
            f"occurs_mappings[{table!r}]: {value!r} is not {width} characters of code page {codepage}; give the "
            f"count field's text"
        )
    space = 0x20 if is_ascii(codepage) else 0x40
    return bytes(raw + [space] * (width - len(raw)))


def _template(layout, size):
    """A record of the maximum layout whose every field holds a valid zero (text: spaces;
    zoned: digits 0; packed: 0; both with the sign the way back writes; binary, floats: 0
    bytes)."""
    rec = np.zeros(size, dtype=np.uint8)
    if not size:
        return rec
    # text first: a REDEFINES alternative that is a number writes its zero over the spaces (any
    # byte is text, not every byte a number)
    for f in sorted(layout.fields, key=lambda f: f.encoding is None or f.encoding.kind != "text"):
        enc = f.encoding
        if enc is None:
            continue
        ascii_ = is_ascii(enc.codepage)
        if enc.kind == "text":
            value = bytes([0x20 if ascii_ else 0x40]) * f.width
        elif enc.kind == "zoned":
            digits = bytes([0x30 if ascii_ else 0xF0]) * enc.digits
            plus = b"+" if ascii_ else b"\x4e"
            if enc.sign == "leading separate":
                digits = plus + digits
            elif enc.sign == "trailing separate":
                digits = digits + plus
            elif enc.positive_sign == 0xC:  # the sign the way back writes (sign_counts counts no other)
                at = 0 if enc.sign.startswith("leading") else -1
                digits = bytearray(digits)
                digits[at] = 0x7B if ascii_ else 0xC0  # (+0 overpunched: '{')
            value = bytes(digits)
        elif enc.kind == "packed":
            value = bytes(f.width - 1) + bytes([enc.positive_sign])
        else:
            continue
        offs = np.asarray(f.element_offsets(), np.int64).reshape(-1, 1)
        rec[offs + np.arange(f.width, dtype=np.int64)] = np.frombuffer(value, np.uint8)
    return rec


# ---------------------------------------------------------------- Arrow lists -> the maximum layout
def uncut(table, book, layout, var):
    """``table`` (lists cut to their counts, as ``read_variable`` gives) with every
    DEPENDING ON list padded to its maximum with the template's element, as the Layout's
    ``fixed_size_list``: innermost tables first. A list whose length is not its count is a
    ConversionError (the way back would lose or make up elements)."""
    from ._aos import AoS
    from .cobol import _apply, depending_tables

    template = AoS(var.template.view(layout.dtype).reshape(-1), layout).to_soa().to_arrow()
    tmpl = pa.StructArray.from_arrays([c.combine_chunks() for c in template.columns], fields=list(template.schema))
    record = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(table.schema))
    for path, counter, cap in reversed(depending_tables(book)):
        where = ".".join(path)
        most = var.maxima.get(path, cap)  # (the copybook's maximum; the record laid out with ``cap`` elements)
        pad = functools.partial(_pad_into, element=_element_of(tmpl, path), most=cap, where=where)
        record = _apply(
            record, path, tuple(counter.split(".")), most, ".".join(path), counter, var.mappings.get(path[-1]), pad
        )
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(record)])


def table_caps(table, maxima):
    """``{table path: the most elements a row's list holds}`` of ``table`` (as read_variable
    gives it) for the DEPENDING ON tables of ``maxima``: the caps the way back lays the record
    out with (a column that is no list is left at its maximum, for :func:`uncut` to name)."""
    import pyarrow.compute as pc

    caps = {}
    for path, most in maxima.items():
        if path[0] not in table.column_names:
            continue
        array = table.column(path[0]).combine_chunks()
        for name in path[1:]:
            while pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
                array = array.flatten()
            if not pa.types.is_struct(array.type) or array.type.get_field_index(name) < 0:
                break
            array = array.field(array.type.get_field_index(name))
        else:
            if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
                longest = pc.max(pc.list_value_length(array)).as_py()
                caps[path] = min(most, int(longest or 0))
    return caps


def _element_of(tmpl, path):
    """The template's first element of the table at ``path`` (a struct or value array of 1)."""
    array = tmpl
    for name in path:
        array = array.field(array.type.get_field_index(name))
        if pa.types.is_fixed_size_list(array.type) or pa.types.is_list(array.type):
            array = array.flatten().slice(0, 1)
    return array


def _pad_into(array, path, counts, *, element, most, where):
    return _pad_at(array, path, counts, element, most, where)


def _pad_at(array, path, counts, element, most, where):
    """``array`` (a struct) with the list at ``path`` padded to ``most`` elements."""
    from .cobol import _index, _with_child

    k = _index(array, path[0], f"the table {where}")
    child = array.field(k)
    if len(path) > 1:
        return _with_child(array, k, _pad_at(child, path[1:], counts, element, most, where))
    if not (pa.types.is_list(child.type) or pa.types.is_large_list(child.type)):
        raise ConversionError(
            f"{where} (OCCURS DEPENDING ON) is a {child.type} column; the way back of records as long as their "
            f"counts takes the lists read_variable gives (cut_depending_on cuts a table read at its maximum)"
        )
    offsets = child.offsets.to_numpy().astype(np.int64)
    lengths = np.diff(offsets)
    bad = np.flatnonzero(lengths != counts)
    if bad.size:
        row = int(bad[0])
        raise ConversionError(
            f"row {row}: {where} holds {int(lengths[row])} elements and its count says {int(counts[row])}; the "
            f"record would lose or make up elements: make the list as long as its count"
        )
    values = child.flatten()
    if values.type != element.type:
        element = element.cast(values.type)
    pool = pa.concat_arrays([values, element])
    slot = np.arange(most, dtype=np.int64)
    index = np.where(slot[None, :] < counts[:, None], offsets[:-1, None] + slot[None, :], len(values))
    return _with_child(array, k, pa.FixedSizeListArray.from_arrays(pool.take(pa.array(index.reshape(-1))), most))


# ---------------------------------------------------------------- the one-pass read
# A record whose tables hold no variable table (each table's body one copy of its whole
# element), counts outside any table, and no record_start_offset/record_end_offset: one
# walk (kernels.occurs.scan_places) finds where each piece of every record is (the runs
# of fields between tables, each table's elements), and each piece is transposed where it
# lies in the data through an index of those places (kernels.stream.aos_to_soa_at, as
# record streams are): no maximum-layout copy, no absent element decoded, no cut. Any
# fault (a count, a short record, a bad value) gives None: the caller reads the data the
# exact way, which names it.


_SPLIT_BYTES = 1 << 20  # data of at least this many bytes is read by every thread of the kernels


class _Pieces:
    """The pieces of a one-level program: ``copies`` (program row, sub-Layout, the paths
    of its top-level columns) and ``tables`` (program row, sub-Layout of one element,
    the table's path, whether the element is a leaf)."""

    def __init__(self, var):
        from ._layout import Layout

        prog = var.prog
        layout = var.layout
        encodings = dict(layout.encodings)
        self.copies, self.tables = [], []
        pc = 0
        while pc < prog.shape[0]:
            op, off, size = int(prog[pc, 0]), int(prog[pc, 1]), int(prog[pc, 2])
            if op == K.OP_COPY:
                group, names = _siblings(var.book.dtype, (), 0, off, off + size)
                prefix = ".".join(group) + "." if group else ""
                dtype = var.book.dtype
                for name in group:
                    dtype = dtype.fields[name][0]
                base = sum(_offset_of(var.book.dtype, group[: d + 1]) for d in range(len(group)))
                sub = np.dtype(
                    {
                        "names": list(names),
                        "formats": [dtype.fields[n][0] for n in names],
                        "offsets": [dtype.fields[n][1] + base - off for n in names],
                        "itemsize": size,
                    }
                )
                self.copies.append((pc, self._layout(Layout, sub, prefix, encodings), [group + (n,) for n in names]))
                pc += 1
                continue
            body = int(prog[pc, 5])
            path = _table_at(var, off)
            elem = _dtype_at(var.book.dtype, path).subdtype[0]
            leaf = elem.names is None
            sub = np.dtype([(path[-1], elem)]) if leaf else elem
            prefix = ".".join(path[:-1]) + "." if leaf and len(path) > 1 else ".".join(path) + "."
            if leaf and len(path) == 1:
                prefix = ""
            self.tables.append((pc, self._layout(Layout, sub, prefix, encodings), path, leaf))
            pc += 1 + body

    @staticmethod
    def _layout(layout_cls, dtype, prefix, encodings):
        mine = {k[len(prefix) :]: v for k, v in encodings.items() if k.startswith(prefix)}
        names = set()

        def leaves(dt, at):
            for n in dt.names:
                sub = dt.fields[n][0]
                sub = sub.subdtype[0] if sub.subdtype else sub
                if sub.names:
                    leaves(sub, at + n + ".")
                else:
                    names.add(at + n)

        leaves(dtype, "")
        return layout_cls.from_dtype(dtype, encodings={k: v for k, v in mine.items() if k in names}, void_as="bytes")


def _offset_of(dtype, path):
    """Offset of ``path[-1]`` within the group ``path[:-1]`` of ``dtype``."""
    for name in path[:-1]:
        dtype = dtype.fields[name][0]
    return dtype.fields[path[-1]][1]


def _dtype_at(dtype, path):
    for name in path:
        dtype = dtype.fields[name][0]
    return dtype


def _siblings(dtype, group, at, lo, hi):
    """``(group path, names)``: the children of the deepest group of ``dtype`` (``at``: its
    offset) whose range holds ``[lo, hi)``, that lie in it."""
    for name in dtype.names:
        sub, off = dtype.fields[name][:2]
        start, end = at + off, at + off + sub.itemsize
        if sub.names and start <= lo and hi <= end and (hi - lo) < sub.itemsize:
            return _siblings(sub, group + (name,), start, lo, hi)
    names = tuple(
        n
        for n in dtype.names
        if lo <= at + dtype.fields[n][1] and at + dtype.fields[n][1] + dtype.fields[n][0].itemsize <= hi
    )
    return group, names


def _table_at(var, off):
    """The path of the DEPENDING ON (or other) table at offset ``off`` of the record."""
    for path in var._sizes:
        dt, at = var.book.dtype, 0
        for name in path:
            sub, o = dt.fields[name][:2]
            at, dt = at + o, sub
        if at == off:
            return path
    raise LayoutError(f"no table at offset {off}")


def one_level(var):
    """Whether ``var``'s program can be read in one pass (see :class:`_Pieces`)."""
    prog = var.prog
    pc = 0
    while pc < prog.shape[0]:
        if prog[pc, 0] == K.OP_TABLE:
            body = int(prog[pc, 5])
            if body != 1 or prog[pc + 1, 0] != K.OP_COPY or prog[pc + 1, 1] != 0 or prog[pc + 1, 2] != prog[pc, 2]:
                return False
            if prog[pc, 4] >= 0 and var.counts[prog[pc, 4], 1] != 0:
                return False
            pc += 2
        else:
            pc += 1
    return not any(getattr(var, "padding", (0, 0)))


def read_pieces(var, data, schema, starts=None, lengths=None):
    """The table of the records of ``data`` (``uint8``) in one pass, or None where the exact
    way must read them (a fault, or a record :func:`one_level` does not take): ``(table,
    starts)``, ``schema`` the table's (the exact way's, for the same columns and types)."""
    from ._arena import Arena
    from ._plan import forward_ops
    from ._soa import soa_over_arena
    from .kernels import stream as KS
    from .kernels.threads import default_threads, thread_pool

    if not one_level(var):
        return None
    pieces = getattr(var, "_pieces", None)
    if pieces is None:
        try:
            pieces = var._pieces = _Pieces(var)
        except (LayoutError, KeyError, TypeError, ValueError):
            return None
    if starts is None:
        status, starts, lengths, places, elements = K.scan_places(
            data, 0, len(data), var.size, var.prog, var.counts, var.keys, var.key_counts
        )
    else:
        status, places, elements = K.framed_places(
            data, starts, lengths, var.size, var.prog, var.counts, var.keys, var.key_counts
        )
    if status != K.OK:
        return None
    n = len(starts)

    def transpose(layout, index):
        m = len(index)
        arena = Arena(layout, m, frozenset())
        memory = arena.allocate()
        ops, offs, keep = forward_ops(arena, memory.ctypes.data, {})
        runs = np.array([[0, 0, layout.itemsize]], np.int64)
        nul = np.zeros((0, 2), np.int64)
        fault = KS.aos_to_soa_at(
            data, index, layout.itemsize, runs, -1, nul, ops, offs, threads=1, owners=(memory, ops, offs, keep)
        )  # one chunk, in this thread: the records are split among threads below
        del keep
        if fault is not None:
            return None
        return soa_over_arena(layout, m, arena, memory, {}, None).to_arrow()

    def part(r0, r1):
        """The table of records [r0, r1), or None."""
        arrays = {}
        for pc, layout, paths in pieces.copies:
            got = transpose(layout, np.ascontiguousarray(places[r0:r1, pc]))
            if got is None:
                return None
            for path in paths:
                arrays[path] = got.column(path[-1]).combine_chunks()
        for pc, layout, path, _leaf in pieces.tables:
            counts = np.ascontiguousarray(elements[r0:r1, pc])
            offsets = np.zeros(r1 - r0 + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            stride = layout.itemsize
            index = np.repeat(places[r0:r1, pc] - offsets[:-1] * stride, counts)
            index += np.arange(offsets[-1], dtype=np.int64) * stride
            got = transpose(layout, index)
            if got is None:
                return None
            arrays[path] = (offsets, got)
        try:
            columns = [_assemble(field, (field.name,), arrays) for field in schema]
            return pa.Table.from_arrays(columns, schema=schema)
        except (pa.ArrowException, KeyError, TypeError, ValueError):  # not the exact way's columns: read it so
            return None

    # EBCDIC text goes through the transpose one chunk a call (aos_to_soa_at joins the chunks
    # of C strings, not those of text): the records are split among the kernels' threads here
    ways = default_threads() if n and len(data) >= _SPLIT_BYTES else 1
    bounds = np.linspace(0, n, ways + 1).astype(np.int64)
    if ways == 1:
        parts = [part(0, n)]
    else:
        futures = [thread_pool().submit(part, int(bounds[k]), int(bounds[k + 1])) for k in range(1, ways)]
        parts = [part(0, int(bounds[1]))] + [f.result() for f in futures]
    if any(p is None for p in parts):
        return None
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    from .cobol import _nulls_of

    if any(_nulls_of(table, counter) for _, counter, _ in var.count_rows if counter):
        return None  # a count invalid='null' made null: the exact way says so
    return table, starts


def _assemble(field, path, arrays):
    from .cobol import _list_array

    got = arrays.get(path)
    if isinstance(got, tuple):
        offsets, part = got
        value = field.type.value_field
        if pa.types.is_struct(value.type):
            values = pa.StructArray.from_arrays(
                [part.column(c.name).combine_chunks() for c in value.type], fields=list(value.type)
            )
        else:
            values = part.column(0).combine_chunks()
        return _list_array(offsets, values, value)
    if got is not None:
        return got
    children = [_assemble(c, path + (c.name,), arrays) for c in field.type]
    return pa.StructArray.from_arrays(children, fields=list(field.type))
