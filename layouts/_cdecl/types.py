"""cffi types of the declarations, laid out by cffi's engine as the C compiler would."""

import re

import numpy as np

from .._errors import LayoutError
from .source import expand
from .spelling import canonical

_SF_PACKED = 8  # cffi's flag for __attribute__((packed)) structs
_STDINT = {
    **{f"int{b}_t": f"int{b}_t" for b in (8, 16, 32, 64)},
    **{f"uint{b}_t": f"uint{b}_t" for b in (8, 16, 32, 64)},
    "intptr_t": "intptr_t",
    "uintptr_t": "uintptr_t",
    "size_t": "size_t",
    "ssize_t": "ssize_t",
    "ptrdiff_t": "ptrdiff_t",
    "wchar_t": "wchar_t",
    "bool": "_Bool",
}


# GCC types pycparser/cffi do not have: (size, alignment, NumPy dtype or None, spelling).
# Sizes are those of x86-64 and aarch64 Linux. None: no NumPy/Arrow type holds it.
_SPECIAL = {
    "__int128": (16, 16, "S16", "__int128"),
    "__int128_t": (16, 16, "S16", "__int128"),
    "unsigned __int128": (16, 16, "S16", "unsigned __int128"),
    "__uint128_t": (16, 16, "S16", "unsigned __int128"),
    "_Float16": (2, 2, "f2", "_Float16"),
    "__fp16": (2, 2, "f2", "__fp16"),
    "_Float32": (4, 4, "f4", "_Float32"),
    "_Float64": (8, 8, "f8", "_Float64"),
    "_Float32x": (8, 8, "f8", "_Float32x"),
    "_Float64x": (16, 16, None, "_Float64x"),
    "_Float128": (16, 16, None, "_Float128"),
    "__float128": (16, 16, None, "_Float128"),
    "__float80": (16, 16, None, "__float80"),
    "__ibm128": (16, 16, None, "__ibm128"),
    "__bf16": (2, 2, None, "__bf16"),
    "__builtin_va_list": (24, 8, None, "__builtin_va_list"),
    "float _Complex": (8, 4, "c8", "float _Complex"),
    "double _Complex": (16, 8, "c16", "double _Complex"),
    "long double _Complex": (32, 16, None, "long double _Complex"),
}


class Types:
    """cffi types of the program's declarations, laid out by cffi's engine."""

    def __init__(self, program, pointers):
        import _cffi_backend as backend

        self.b, self.p, self.ast, self.pointers = backend, program, program.ast_mod, pointers
        self.records = {}  # id(struct node) -> cffi type
        self.members = {}  # cffi record type -> [(member name, ctype, C spelling, coord)]
        self.unwrap = {}  # cffi wrapper type (aligned/packed member) -> the member's own type
        self.enums = {}  # cffi enum type -> (enumerators ((value, name), ...), numpy dtype)
        self.anonymous = set()  # synthetic member names of anonymous structs/unions
        self.pointer_types = set()
        self.special = {}  # cffi stand-in type -> (NumPy dtype or None, C spelling)
        self.cache = {}
        program.sizeof = self.sizeof_expr

    def primitive(self, names, where):
        """The cffi type of a list of C type keywords (``['unsigned', 'long']``)."""
        words = [w for w in names if w not in ("const", "volatile")]
        if "_Complex" in words or "__int128" in words or (len(words) == 1 and words[0] in _SPECIAL):
            rest = [w for w in words if w not in ("_Complex", "signed")]
            key = canonical(rest) + (" _Complex" if "_Complex" in words else "")
            if key not in _SPECIAL:
                raise LayoutError(
                    f"{where}: unknown type {' '.join(names)!r}; declare it (typedef) before use, or include its header"
                )
            return self.special_type(key)
        if len(words) == 1 and words[0] in _STDINT:
            return self._prim(_STDINT[words[0]])
        unsigned = "unsigned" in words
        signed = "signed" in words
        longs = words.count("long")
        base = next((w for w in words if w in ("char", "int", "float", "double", "_Bool", "void")), None)
        if "short" in words:
            cname = "short"
        elif base in ("float", "double", "_Bool", "void"):
            cname = ("long double" if longs else base) if base == "double" else base
        elif base == "char":
            cname = "signed char" if signed else "char"
        else:
            cname = {0: "int", 1: "long", 2: "long long"}.get(longs)
        unknown = [
            w
            for w in words
            if w not in ("unsigned", "signed", "long", "short", "char", "int", "float", "double", "_Bool", "void")
        ]
        if cname is None or unknown or (base is None and not (unsigned or signed or longs or "short" in words)):
            raise LayoutError(
                f"{where}: unknown type {' '.join(names)!r}; declare it (typedef) before use, or include its header"
            )
        if unsigned and cname in ("char", "signed char", "short", "int", "long", "long long"):
            cname = "unsigned " + cname.replace("signed ", "")
        return self._prim(cname)

    def special_type(self, key):
        """A cffi stand-in (a struct of the right size and alignment) for a GCC type."""
        if key not in self.cache:
            size, align, dtype, spelled = _SPECIAL[key]
            stand_in = self.b.new_struct_type(f"__layouts_{spelled.replace(' ', '_')}")
            chars = self.b.new_array_type(self.b.new_pointer_type(self._prim("char")), size)
            self.b.complete_struct_or_union(stand_in, [("v", chars, -1, 0)], None, size, align)
            self.special[stand_in] = (np.dtype(dtype) if dtype else None, spelled)
            self.cache[key] = stand_in
        return self.cache[key]

    def _prim(self, cname):
        if cname not in self.cache:
            self.cache[cname] = self.b.new_primitive_type(cname) if cname != "void" else self.b.new_void_type()
        return self.cache[cname]

    def of(self, node, where, field):
        """cffi type of a declarator type node; ``field`` names it for errors."""
        ast = self.ast
        if isinstance(node, ast.TypeDecl):
            inner = node.type
            if isinstance(inner, ast.IdentifierType):
                if len(inner.names) == 1 and inner.names[0] in _SPECIAL:
                    return self.special_type(inner.names[0])
                if len(inner.names) == 1 and inner.names[0] in self.p.typedefs:
                    td = self.p.typedefs[inner.names[0]]
                    return self._aligned(self.of(td.type, where, field), self.p.attrs.for_decl(td.coord), where)
                return self.primitive(inner.names, where)
            if isinstance(inner, (ast.Struct, ast.Union)):
                return self.of_record("struct" if isinstance(inner, ast.Struct) else "union", inner, None)
            if isinstance(inner, ast.Enum):
                return self.of_enum(inner)
        if isinstance(node, ast.ArrayDecl):
            item = self.of(node.type, where, field)
            if node.dim is None:
                raise LayoutError(
                    f"{where}: field {field!r} is a flexible array member: it has no fixed size, and "
                    f"records need fixed-size fields; give it a length, or read the variable part "
                    f"separately"
                )
            n = self.p.const(node.dim, f"the length of array {field!r}", self.sizeof_expr)
            if n < 0:
                raise LayoutError(f"{where}: array {field!r} has negative length {n}")
            if n * self.b.sizeof(item) >= 2**31:
                raise LayoutError(
                    f"{where}: array {field!r} is {n * self.b.sizeof(item):,} bytes; layouts holds "
                    f"records of up to 2 GiB: check its length"
                )
            return self.b.new_array_type(self.b.new_pointer_type(item), n)
        if isinstance(node, ast.PtrDecl):
            if self.pointers == "error":
                raise LayoutError(
                    f"{where}: field {field!r} is a pointer: an address in the process that wrote "
                    f"the records, not data; pass pointers='int' to keep it as an unsigned integer "
                    f"column, or remove the field"
                )
            ptr = self.b.new_pointer_type(self._prim("char"))
            self.pointer_types.add(ptr)
            return ptr
        if isinstance(node, ast.FuncDecl):
            raise LayoutError(f"{where}: {field!r} is a function, not data; only fields can be laid out")
        raise LayoutError(f"{where}: cannot lay out {field!r} ({type(node).__name__})")

    def sizeof_expr(self, expr, align=False):
        """``sizeof(type)`` (or ``_Alignof(type)`` with ``align``) in a constant expression."""
        ast = self.ast
        if isinstance(expr, ast.Typename):
            ctype = self.of(expr.type, self.p.where(expr), "sizeof")
            return self.b.alignof(ctype) if align else self.b.sizeof(ctype)
        raise LayoutError(
            f"{self.p.where(expr)}: sizeof of an expression is not supported here; use "
            f"sizeof(type), or let the C compiler lay the record out (compiler='auto')"
        )

    def of_enum(self, node):
        key = id(node)
        if key in self.records:
            return self.records[key]
        body = node if node.values is not None else self.p.tags.get(("enum", node.name))
        if body is None:
            raise LayoutError(f"{self.p.where(node)}: enum {node.name} is declared but never defined")
        pairs = self.p.enum_values(body)
        names, values = [n for n, _ in pairs], [v for _, v in pairs]
        packed = "packed" in self.p.attrs.for_type(body.coord)
        lo, hi = min(values, default=0), max(values, default=0)
        for size in (1, 2, 4, 8) if packed else (4, 8):
            if lo >= 0 and hi < 2 ** (8 * size):
                dtype = np.dtype(f"u{size}")
                break
            if -(2 ** (8 * size - 1)) <= lo and hi < 2 ** (8 * size - 1):
                dtype = np.dtype(f"i{size}")
                break
        else:
            raise LayoutError(f"{self.p.where(body)}: enum {body.name or ''} has values beyond 64 bits")
        base = self._prim(_CNAME[dtype.str[1:]])
        ctype = self.b.new_enum_type(body.name or "", tuple(names), tuple(values), base)
        table = {}
        for n, v in zip(names, values):
            table.setdefault(v, n)  # an alias keeps the first name of its value
        self.enums[ctype] = (tuple(sorted(table.items())), dtype)
        self.records[key] = ctype
        return ctype

    def of_record(self, kind, node, label):
        if node.decls is None:
            body = self.p.tags.get((kind, node.name))
            if body is None:
                raise LayoutError(
                    f"{self.p.where(node)}: {kind} {node.name} is declared but never defined, so its "
                    f"size is unknown; include the header that defines it"
                )
            node = body
        key = id(node)
        if key in self.records:
            return self.records[key]
        ctype = (self.b.new_struct_type if kind == "struct" else self.b.new_union_type)(node.name or "")
        self.records[key] = ctype
        record = label or f"{kind} {node.name or '(anonymous)'}"
        attrs = self.p.attrs.for_type(node.coord)
        fields, members = [], []
        explicit_align = set()
        for decl in node.decls:
            if not isinstance(decl, self.ast.Decl):
                continue
            where = self.p.where(decl)
            name = decl.name
            if name is None:
                if decl.bitsize is not None:  # unnamed bit-field: padding, laid out by cffi
                    unnamed = self.of(decl.type, where, "(unnamed bit-field)")
                    width = self._width(decl, unnamed, "an unnamed bit-field", where, named=False)
                    fields.append(("", unnamed, width))
                    continue
                if not isinstance(decl.type, (self.ast.Struct, self.ast.Union)):
                    continue
                name = f"__anonymous_{len(self.anonymous)}"
                self.anonymous.add(name)
                member = self.of_record(
                    "struct" if isinstance(decl.type, self.ast.Struct) else "union", decl.type, None
                )
            else:
                member = self.of(decl.type, where, f"{record}.{name}")
                member_attrs = self.p.attrs.for_decl(decl.coord)
                if getattr(decl, "align", None):  # _Alignas(n) / _Alignas(type): as aligned(n)
                    want = max(self._alignas(a, where) for a in decl.align)
                    if want:
                        member_attrs = {
                            **member_attrs,
                            "aligned": str(
                                max(
                                    want,
                                    _alignment(member_attrs["aligned"], self.p, None)
                                    if "aligned" in member_attrs
                                    else 0,
                                )
                            ),
                        }
                if "packed" in attrs and "aligned" in member_attrs:
                    # GCC: packed members get alignment 1, but an explicit aligned(n) still
                    # holds (capped by #pragma pack).
                    member_attrs = {**member_attrs, "packed": None}
                    explicit_align.add(name)
                member = self._aligned(member, member_attrs, where, self.p.pack_of.get(key))
            bits = -1
            if decl.bitsize is not None:
                bits = self._width(decl, member, f"bit-field {name!r}", where)
            fields.append((name, member, bits))
            members.append((name, member, _spell(decl.type, self.p, bits), where))
        self._check_attrs(attrs, record, self.p.where(node))
        pack = self.p.pack_of.get(key)
        flags = (_SF_PACKED,) if "packed" in attrs or pack == 1 else ((0, pack) if pack else ())
        if (_SF_PACKED,) == flags and any(b == 0 for _, _, b in fields):
            raise LayoutError(
                f"{self.p.where(node)}: {record} is packed and has a zero-width bit-field (':0'), "
                f"which GCC aligns differently from cffi's layout engine (the one layouts uses); "
                f"layouts does not model it: remove the ':0' or the packing for this record"
            )
        if pack and pack > 1 and any(b >= 0 for _, _, b in fields):
            raise LayoutError(
                f"{self.p.where(node)}: {record} has bit-fields under #pragma pack({pack}), which GCC "
                f"places differently from cffi's layout engine (the one layouts uses); layouts does "
                f"not model it: use pack 1 or __attribute__((packed)), or no pragma, for this record"
            )
        if explicit_align and "packed" in attrs:
            if any(b >= 0 for _, _, b in fields):
                raise LayoutError(
                    f"{self.p.where(node)}: {record} is packed and mixes bit-fields with aligned() members, "
                    f"which layouts does not model; describe the record without one of them"
                )
            fields = [
                (n, t if n in explicit_align else self._aligned(t, {"packed": None}, ""), b) for n, t, b in fields
            ]
            flags = (0, pack) if pack and pack > 1 else ()
        try:
            self.b.complete_struct_or_union(ctype, [(n, t, b) for n, t, b in fields], None, -1, -1, *flags)
            if "aligned" in attrs:
                want = _alignment(attrs["aligned"], self.p, node)
                if want > self.b.alignof(ctype):
                    size = -(-self.b.sizeof(ctype) // want) * want
                    ctype = (self.b.new_struct_type if kind == "struct" else self.b.new_union_type)(node.name or "")
                    self.b.complete_struct_or_union(ctype, [(n, t, b) for n, t, b in fields], None, size, want, *flags)
        except NotImplementedError as err:
            field = re.search(r"field '([^']*)'", str(err))
            raise LayoutError(
                f"{self.p.where(node)}: cannot lay out {record}: packed bit-field "
                f"{field.group(1) if field else ''!r} straddles the storage unit of the field before it, "
                f"which cffi's layout engine (the one layouts uses to match the compiler) does not "
                f"model; declare it as a plain integer field and extract the bits yourself"
            ) from None
        except (TypeError, ValueError) as err:
            raise LayoutError(f"{self.p.where(node)}: cannot lay out {record}: {err}") from None
        self.records[key] = ctype
        self.members[ctype] = members
        return ctype

    def _width(self, decl, ctype, what, where, named=True):
        """The width of a bit-field, checked as GCC does."""
        width = self.p.const(decl.bitsize, f"the width of {what}")
        ctype = self.unwrap.get(ctype, ctype)
        if ctype in self.special or ctype.kind not in ("primitive", "enum"):
            raise LayoutError(f"{where}: {what} has a type that cannot hold a bit-field; use an integer type")
        limit = 8 * self.b.sizeof(ctype) if ctype.cname != "_Bool" else 1
        if width < 0:
            raise LayoutError(f"{where}: {what} has negative width {width}; give it a width from 1 to {limit}")
        if width > limit:
            raise LayoutError(
                f"{where}: the width of {what} ({width}) exceeds its type ({limit} bits); give it "
                f"a width from 1 to {limit}, or a wider type"
            )
        if width == 0 and named:
            raise LayoutError(
                f"{where}: {what} has zero width; only an unnamed bit-field (': 0') may, to start a new storage unit"
            )
        return width

    def _alignas(self, node, where):
        """The alignment an ``_Alignas(...)`` asks for (0: none)."""
        arg = getattr(node, "alignment", node)
        if isinstance(arg, self.ast.Typename):
            return self.b.alignof(self.of(arg.type, where, "_Alignas"))
        value = self.p.const(arg, "_Alignas")
        if value and (value < 0 or value & (value - 1)):
            raise LayoutError(f"{where}: _Alignas({value}) must be a power of two")
        return value

    def _check_attrs(self, attrs, record, where):
        bad = sorted(set(attrs) & {"mode", "vector_size", "scalar_storage_order", "ms_struct"})
        if bad:
            raise LayoutError(
                f"{where}: {record} uses __attribute__(({bad[0]})), which layouts "
                f"does not model; describe the record without it"
            )

    def _aligned(self, ctype, attrs, where, cap=None):
        """A member's type under ``aligned(n)``/``packed``: a cffi wrapper of the same size
        with the alignment GCC gives the member (at most ``cap``, a ``#pragma pack``)."""
        if not attrs:
            return ctype
        self._check_attrs(attrs, "the field", where)
        align = self.b.alignof(ctype)
        if "packed" in attrs:
            align = 1
        if "aligned" in attrs:
            align = max(align, _alignment(attrs["aligned"], self.p, None))
        if cap:
            align = min(align, cap)
        if align == self.b.alignof(ctype):
            return ctype
        wrapper = self.b.new_struct_type(f"__aligned_{align}")
        self.b.complete_struct_or_union(wrapper, [("v", ctype, -1, 0)], None, self.b.sizeof(ctype), align)
        self.unwrap[wrapper] = ctype
        return wrapper


_CNAME = {
    "i1": "int8_t",
    "u1": "uint8_t",
    "i2": "int16_t",
    "u2": "uint16_t",
    "i4": "int32_t",
    "u4": "uint32_t",
    "i8": "int64_t",
    "u8": "uint64_t",
}


def _alignment(arg, program, node):
    if arg is None:
        return 16  # GCC's largest alignment on x86-64 and aarch64
    try:
        value = int(expand(arg, {k: str(v) for k, v in program.all_constants().items()}).strip(), 0)
    except ValueError:
        raise LayoutError(
            f"{program.where(node) if node else program.pre.main}: aligned({arg}) must be an integer constant"
        ) from None
    if value < 1 or value & (value - 1):
        raise LayoutError(f"aligned({arg}) must be a power of two")
    return value


def _spell(node, program, bits=-1):
    """The C type of a member as written: ``uint32_t``, ``char[16]``, ``struct q``."""
    ast = program.ast_mod
    dims = ""
    while isinstance(node, ast.ArrayDecl):
        dims += f"[{program.const(node.dim, 'array length') if node.dim is not None else ''}]"
        node = node.type
    stars = ""
    while isinstance(node, ast.PtrDecl):
        stars += "*"
        node = node.type
    if isinstance(node, ast.FuncDecl):  # a function pointer: its return type, then (*)()
        return f"{_spell(node.type, program)} ({stars})(){dims}" + (f" :{bits}" if bits >= 0 else "")
    inner = getattr(node, "type", node)
    if isinstance(inner, ast.IdentifierType):
        base = canonical(inner.names)
    elif isinstance(inner, (ast.Struct, ast.Union, ast.Enum)):
        base = f"{type(inner).__name__.lower()} {inner.name or '{...}'}"
    else:
        base = type(inner).__name__
    return f"{base}{stars}{dims}" + (f" :{bits}" if bits >= 0 else "")
