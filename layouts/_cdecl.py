"""C declarations -> Layout, with the offsets the C compiler gives.

The pipeline, one stage a class or function:

1. :func:`_source` reads a header path or takes declarations as text.
2. :func:`_preprocess` runs the system C preprocessor when there is one (``#include``,
   ``#define``, ``#if``), or a small built-in one for text that only has comments,
   object-like ``#define`` constants and ``#pragma pack``.
3. :func:`_lift_attributes` takes the GNU ``__attribute__((...))`` lists out of the text
   (pycparser does not parse them) and remembers where each one was.
4. pycparser parses the rest; :class:`_Program` collects typedefs, tags, enum constants
   and the ``#pragma pack`` in force for each struct.
5. :class:`_Types` builds cffi types from the syntax tree. cffi's layout engine (the
   one it uses to talk to C libraries) places every field and bit-field;
   ``packed``/``aligned`` and ``#pragma pack`` are passed to it.
6. :class:`_Extract` walks the cffi type and writes the NumPy dtype and the
   :class:`~layouts._layout.CInfo` (bit-fields, enums, C spellings) of the Layout.
"""

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from ._errors import LayoutError
from ._layout import CInfo, Layout

__all__ = ["from_c"]

_BYTEORDERS = {"native": "=", "little": "<", "big": ">"}
_SF_PACKED = 8  # cffi's flag for __attribute__((packed)) structs
_CHAR_SIGNED = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
_STDINT = {
    **{f"int{b}_t": f"int{b}_t" for b in (8, 16, 32, 64)},
    **{f"uint{b}_t": f"uint{b}_t" for b in (8, 16, 32, 64)},
    "intptr_t": "intptr_t", "uintptr_t": "uintptr_t", "size_t": "size_t", "ssize_t": "ssize_t",
    "ptrdiff_t": "ptrdiff_t", "wchar_t": "wchar_t", "bool": "_Bool",
}
_IGNORED_TOKENS = re.compile(r"\b(__extension__|__restrict__|__restrict|__inline__|__inline|__volatile__)\b")


def from_c(source, name=None, *, byteorder="native", pack=None, unions=None, pointers="error",
           enum_as="dictionary", bytes_as="fixed", flatten=False, include_dirs=(), defines=None,
           preprocessor="auto"):
    """Layout of a C record: see :meth:`layouts.Layout.from_c`, which documents it."""
    if byteorder not in _BYTEORDERS:
        raise LayoutError(f"byteorder must be one of {sorted(_BYTEORDERS)}, got {byteorder!r}")
    if pointers not in ("error", "int"):
        raise LayoutError(f"pointers must be 'error' or 'int', got {pointers!r}")
    if pack is not None and (not isinstance(pack, int) or pack < 1 or pack & (pack - 1)):
        raise LayoutError(f"pack must be a power of two (1, 2, 4, 8, 16), got {pack!r}")
    program = _parse(source, pack, include_dirs, defines, preprocessor)
    kind, node, label = program.find(name)
    types = _Types(program, pointers)
    ctype = types.of_record(kind, node, label)
    return _Extract(types, byteorder, dict(unions or {}), label).layout(
        ctype, program.pre.main, enum_as=enum_as, bytes_as=bytes_as, flatten=flatten)


def record_names(source, *, include_dirs=(), defines=None, preprocessor="auto"):
    """Names of the structs and unions the source itself defines (not its includes), in
    source order, one name per record (its typedef name where it has no tag)."""
    return _parse(source, None, include_dirs, defines, preprocessor).names()


def _parse(source, pack, include_dirs, defines, preprocessor):
    text, filename = _source(source)
    pre = _preprocess(text, filename, preprocessor, include_dirs, defines or {})
    clean, attrs = _lift_attributes(pre.text)
    return _Program(clean, attrs, pre, pack)


# --------------------------------------------------------------------------- source


def _source(source):
    """``(text, filename)`` of a path or of declarations given as text."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and not re.search(r"[;{}]", source)):
        path = Path(source)
        if not path.is_file():
            raise LayoutError(
                f"no such header file: {str(path)!r}; pass C declarations as text or the path of a "
                f"file that exists"
            )
        return path.read_text(errors="replace"), str(path)
    if not isinstance(source, str):
        raise LayoutError(f"source must be C declarations (str) or a file path, got {type(source).__name__}")
    return source, "<string>"


class _Preprocessed:
    """Preprocessed text whose line i came from ``origin[i]`` = (file, line)."""

    def __init__(self, text, origin, main):
        self.text, self.origin, self.main = text, origin, main

    def where(self, line, col=None):
        file, orig = self.origin[line - 1] if 0 < line <= len(self.origin) else (self.main, line)
        return f"{file}:{orig}" + (f":{col}" if col else "")

    def in_main(self, line):
        return 0 < line <= len(self.origin) and self.origin[line - 1][0] == self.main


def _find_cpp(preprocessor):
    if isinstance(preprocessor, str) and preprocessor != "auto":
        found = shutil.which(preprocessor)
        if not found:
            raise LayoutError(f"preprocessor {preprocessor!r} was not found on PATH")
        return [found] if "cpp" in Path(found).name else [found, "-E"]
    for prog, args in (("cpp", []), ("gcc", ["-E"]), ("cc", ["-E"]), ("clang", ["-E"])):
        found = shutil.which(prog)
        if found:
            return [found, *args]
    return None


def _preprocess(text, filename, preprocessor, include_dirs, defines):
    cpp = None if preprocessor is False else _find_cpp(preprocessor)
    if cpp is None and preprocessor is True:
        raise LayoutError("preprocessor=True but no C preprocessor (cpp, gcc, cc, clang) is on PATH")
    if cpp is None:
        return _mini_preprocess(text, filename, defines)
    main = filename
    args = [*cpp, "-x", "c", "-std=gnu11"]
    args += [f"-I{d}" for d in include_dirs]
    args += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()]
    if filename == "<string>":
        args += ["-I", os.getcwd(), "-"]
    else:
        args += ["-I", str(Path(filename).parent), filename]
    run = subprocess.run(args, input=text if filename == "<string>" else None, capture_output=True,
                         text=True, errors="replace")
    if run.returncode != 0:
        first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr.strip())
        raise LayoutError(f"the C preprocessor failed: {first.replace('<stdin>', '<string>')}")
    lines, origin = [], []
    file, line = main, 1
    marker = re.compile(r'#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
    for raw in run.stdout.split("\n"):
        m = marker.match(raw)
        if m:
            line, file = int(m.group(1)), m.group(2)
            file = main if file in ("<stdin>", filename) else file
            lines.append("")
            origin.append((file, line))
            continue
        lines.append(raw)
        origin.append((file, line))
        line += 1
    return _Preprocessed("\n".join(lines), origin, main)


def _mini_preprocess(text, filename, defines):
    """Comments, object-like #define constants and #pragma; anything else needs cpp."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    macros = {k: "1" if v is None else str(v) for k, v in defines.items()}
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("#"):
            out.append(_expand(line, macros))
            continue
        m = re.match(r"#\s*(\w+)\s*(.*)", stripped)
        directive = m.group(1) if m else ""
        if directive == "define" and re.match(r"[A-Za-z_]\w*(\s|$)", m.group(2)):
            key, _, value = m.group(2).partition(" ")
            macros[key] = _expand(value.strip(), macros) or "1"
            out.append("")
        elif directive == "pragma":
            out.append(line)
        else:
            raise LayoutError(
                f"{filename}:{number}: {stripped.split()[0]} needs a C preprocessor, and none "
                f"(cpp, gcc, cc, clang) is on PATH; install one (e.g. the cpp or gcc package) or "
                f"pass the declarations with the directives already expanded"
            )
    return _Preprocessed("\n".join(out), [(filename, i + 1) for i in range(len(out))], filename)


def _expand(line, macros):
    if not macros:
        return line
    for _ in range(16):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: macros.get(m.group(), m.group()), line)
        if new == line:
            break
        line = new
    return line


# ------------------------------------------------------------------ GNU attributes

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|[A-Za-z_]\w*|\d[\w.]*|\S')
_TAGGED = ("struct", "union", "enum")


class _Attrs:
    """GNU attributes found in the text, keyed by where they apply.

    ``types[(line, col)]``: a struct/union/enum whose tag (or ``{`` when it has none)
    is there. ``names[(line, col)]``: the declarator named there. ``spans``: a
    declaration between two positions (attributes written before its declarators).
    """

    def __init__(self):
        self.types, self.names, self.spans = {}, {}, []

    def for_type(self, coord):
        return self.types.get((coord.line, coord.column), {})

    def for_decl(self, coord):
        found = dict(self.names.get((coord.line, coord.column), {}))
        for start, end, attrs in self.spans:
            if start <= (coord.line, coord.column) <= end:
                found.update(attrs)
        return found


def _lift_attributes(text):
    """Blank out ``__attribute__((...))`` (keeping every other character in place) and
    the GNU keywords pycparser does not know; return the text and the :class:`_Attrs`."""
    text = _IGNORED_TOKENS.sub(lambda m: " " * len(m.group()), text)
    text = re.sub(r"\b__signed__\b", "signed    ", text)
    text = re.sub(r"\b__const\b", "const  ", text)
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    toks = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]

    def pos(i):
        offset = toks[i][1] if i < len(toks) else len(text)
        line = _bisect(starts, offset)
        return line + 1, offset - starts[line] + 1

    chars = list(text)
    attrs = _Attrs()
    i = 0
    while i < len(toks):
        word = toks[i][0]
        if word in ("__asm__", "__asm", "asm") and i + 1 < len(toks) and toks[i + 1][0] == "(":
            end = _match(toks, i + 1)
            _blank(chars, toks, i, end)
            i = end + 1
            continue
        if word not in ("__attribute__", "__attribute"):
            i += 1
            continue
        end = _match(toks, i + 1) if i + 1 < len(toks) and toks[i + 1][0] == "(" else i
        items = _attribute_items(text[toks[i + 1][1] : toks[end][1] + 1] if end > i else "")
        _blank(chars, toks, i, end)
        _attach(attrs, toks, i, end, items, pos)
        i = end + 1
    return "".join(chars), attrs


def _bisect(starts, offset):
    lo, hi = 0, len(starts)
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid
    return lo


def _match(toks, i):
    """Index of the bracket closing the one at toks[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    opening, depth = toks[i][0], 0
    for j in range(i, len(toks)):
        if toks[j][0] == opening:
            depth += 1
        elif toks[j][0] == pairs[opening]:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _match_back(toks, i):
    """Index of the bracket opening the one closed at toks[i]."""
    pairs = {")": "(", "]": "[", "}": "{"}
    closing, depth = toks[i][0], 0
    for j in range(i, -1, -1):
        if toks[j][0] == closing:
            depth += 1
        elif toks[j][0] == pairs[closing]:
            depth -= 1
            if depth == 0:
                return j
    return 0


def _blank(chars, toks, i, end):
    for j in range(i, end + 1):
        word, start = toks[j]
        chars[start : start + len(word)] = " " * len(word)


def _attribute_items(inner):
    """``((packed, aligned(8)))`` -> {"packed": None, "aligned": "8"}."""
    body = inner.strip()
    while body.startswith("(") and body.endswith(")"):
        body = body[1:-1].strip()
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    items.append(cur)
    found = {}
    for item in items:
        m = re.match(r"\s*(\w+)\s*(?:\((.*)\))?\s*$", item, re.S)
        if m:
            found[m.group(1).strip("_")] = m.group(2)
    return found


def _attach(attrs, toks, i, end, items, pos):
    """Record where the attribute at toks[i..end] applies."""
    word = lambda j: toks[j][0] if 0 <= j < len(toks) else ";"  # noqa: E731
    ident = lambda j: re.match(r"[A-Za-z_]", word(j)) is not None and word(j) not in _TAGGED  # noqa: E731
    prev, nxt = word(i - 1), word(end + 1)
    marks = None  # token indices that name the struct/union/enum the attribute belongs to
    if prev in _TAGGED:  # struct __attribute__((packed)) [tag] {
        j = end + 1
        marks = [i - 1, j] + ([j + 1] if ident(j) and word(j + 1) == "{" else [])
    elif word(i - 2) in _TAGGED and ident(i - 1) and nxt == "{":  # struct tag __attribute__ {
        marks = [i - 2, i - 1, end + 1]
    elif prev == "}":  # struct [tag] { ... } __attribute__((packed))
        brace = _match_back(toks, i - 1)
        marks = [brace] + ([brace - 1, brace - 2] if ident(brace - 1) and word(brace - 2) in _TAGGED
                           else [brace - 1] if word(brace - 1) in _TAGGED else [])
    if marks is not None:
        for j in marks:
            if 0 <= j < len(toks):
                attrs.types.setdefault(pos(j), {}).update(items)
        return
    if nxt in (";", ",", "=", ":", ")", "{"):  # after a declarator: int x __attribute__(...);
        j = i - 1
        while j >= 0 and word(j) in ("]", ")"):
            j = _match_back(toks, j) - 1
        if ident(j):
            attrs.names.setdefault(pos(j), {}).update(items)
        return
    k, depth = end + 1, 0  # before the declarators: the whole declaration
    while k < len(toks) and not (depth == 0 and word(k) == ";"):
        depth += word(k) in "({["
        depth -= word(k) in ")}]"
        k += 1
    attrs.spans.append((pos(end + 1), pos(k), items))


# ------------------------------------------------------------------------ program


class _Program:
    """Typedefs, struct/union/enum definitions, enum constants and pragmas of a source."""

    def __init__(self, text, attrs, pre, pack):
        from pycparser import c_ast, c_parser

        self.ast_mod, self.attrs, self.pre = c_ast, attrs, pre
        try:
            tree = c_parser.CParser().parse(text, filename="<pre>")
        except c_parser.ParseError as err:
            m = re.match(r"<pre>:(\d+):(\d+): (.*)", str(err))
            if m:
                raise LayoutError(f"{pre.where(int(m.group(1)), int(m.group(2)))}: C syntax error {m.group(3)}") from None
            raise LayoutError(
                f"{pre.main}: C syntax error: {str(err).replace('<pre>: ', '')} (is a type name used "
                f"before its typedef or #include?)") from None
        self.typedefs, self.tags, self.constants = {}, {}, {}
        self.pack_of, self.records = {}, []
        self.default_pack = pack
        self._stack, self._pack = [], pack
        for ext in tree.ext:
            self._visit(ext)

    def where(self, node):
        c = getattr(node, "coord", None)
        return self.pre.where(c.line, c.column) if c else self.pre.main

    def _pragma(self, text):
        m = re.match(r"\s*pack\s*\((.*)\)\s*$", text)
        if not m:
            return
        args = [a.strip() for a in m.group(1).split(",") if a.strip()]
        numbers = [int(a, 0) for a in args if re.fullmatch(r"\d+|0x[0-9a-fA-F]+", a)]
        if args and args[0] == "push":
            self._stack.append(self._pack)
            if numbers:
                self._pack = numbers[0]
        elif args and args[0] == "pop":
            self._pack = self._stack.pop() if self._stack else self.default_pack
        else:
            self._pack = numbers[0] if numbers else self.default_pack

    def _visit(self, node):
        ast = self.ast_mod
        if isinstance(node, ast.Pragma):
            self._pragma(node.string)
        elif isinstance(node, ast.Typedef):
            self._visit(node.type)
            self.typedefs[node.name] = node
        elif isinstance(node, ast.Decl):
            self._visit(node.type)
        elif isinstance(node, (ast.TypeDecl, ast.ArrayDecl, ast.PtrDecl)):
            self._visit(node.type)
        elif isinstance(node, (ast.Struct, ast.Union)) and node.decls is not None:
            kind = "struct" if isinstance(node, ast.Struct) else "union"
            for member in node.decls:
                self._visit(member)
            self.pack_of[id(node)] = self._pack
            if node.name:
                self.tags[(kind, node.name)] = node
            self.records.append((kind, node))
        elif isinstance(node, ast.Enum) and node.values is not None:
            self.tags[("enum", node.name)] = node
            value = -1
            for e in node.values.enumerators:
                value = self.const(e.value, f"enumerator {e.name}") if e.value is not None else value + 1
                self.constants[e.name] = value

    def names(self):
        """One name per record defined in the main source, in source order."""
        named = self._named()
        first = {}
        for label, (_, node) in named.items():  # tags come before typedef names
            first.setdefault(id(node), label)
        order = sorted(first.items(), key=lambda kv: next(
            (n.coord.line, n.coord.column) for _, n in named.values() if id(n) == kv[0]))
        return [label for _, label in order]

    def _named(self):
        ast = self.ast_mod
        named = {}
        for key, node in self.tags.items():
            if key[0] != "enum" and self.pre.in_main(node.coord.line):
                named[f"{key[0]} {key[1]}"] = (key[0], node)
        for tname, td in self.typedefs.items():
            target = self.resolve_typedef(td.type)
            if isinstance(target, (ast.Struct, ast.Union)) and self.pre.in_main(td.coord.line):
                kind = "struct" if isinstance(target, ast.Struct) else "union"
                node = target if target.decls is not None else self.tags.get((kind, target.name))
                if node is not None:
                    named[tname] = (kind, node)
        return named

    def find(self, name):
        """``(kind, node, label)`` of the record ``name`` (see :func:`from_c`)."""
        named = self._named()
        if name is None:
            distinct = {id(n): k for k, (_, n) in named.items()}
            if len(distinct) == 1:
                label = next(iter(named))
                return (*named[label], label)
            raise LayoutError(
                f"the source defines {len(distinct)} structs/unions ({', '.join(sorted(named)) or 'none'}); "
                f"pass the name of the one the records hold"
            )
        key = name.strip()
        for candidate in (key, f"struct {key}", f"union {key}"):
            if candidate in named:
                return (*named[candidate], candidate)
        for kind in ("struct", "union"):
            if key.startswith(kind + " ") and (kind, key[len(kind) + 1 :].strip()) in self.tags:
                node = self.tags[(kind, key[len(kind) + 1 :].strip())]
                return kind, node, key
        raise LayoutError(
            f"no struct or union named {name!r} in {self.pre.main}; it defines: "
            f"{', '.join(sorted(named)) or 'none'}"
        )

    def resolve_typedef(self, node):
        """Follow a TypeDecl through typedef names to the Struct/Union/Enum/IdentifierType."""
        ast = self.ast_mod
        seen = 0
        while isinstance(node, ast.TypeDecl):
            inner = node.type
            if isinstance(inner, ast.IdentifierType) and len(inner.names) == 1 and inner.names[0] in self.typedefs:
                node = self.typedefs[inner.names[0]].type
                seen += 1
                if seen > 64:
                    break
                continue
            return inner
        return node

    def const(self, expr, what, sizeof=None):
        """Evaluate an integer constant expression (array sizes, bit widths, enums)."""
        ast = self.ast_mod
        if isinstance(expr, ast.Constant):
            if expr.type == "char":
                body = expr.value[1:-1]
                return ord(body.encode().decode("unicode_escape")) if body else 0
            if expr.type not in ("int", "unsigned int", "long int", "unsigned long int",
                                 "long long int", "unsigned long long int"):
                raise LayoutError(f"{self.where(expr)}: {what} must be an integer constant, got {expr.value}")
            return int(re.sub(r"[uUlL]+$", "", expr.value), 0) if not re.fullmatch(r"0\d+[uUlL]*", expr.value) \
                else int(re.sub(r"[uUlL]+$", "", expr.value), 8)
        if isinstance(expr, ast.ID) and expr.name in self.constants:
            return self.constants[expr.name]
        if isinstance(expr, ast.UnaryOp):
            if expr.op == "sizeof" and sizeof is not None:
                return sizeof(expr.expr)
            v = self.const(expr.expr, what, sizeof)
            ops = {"-": lambda: -v, "+": lambda: v, "~": lambda: ~v, "!": lambda: int(not v)}
            if expr.op in ops:
                return ops[expr.op]()
        if isinstance(expr, ast.BinaryOp):
            a, b = self.const(expr.left, what, sizeof), self.const(expr.right, what, sizeof)
            ops = {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if b >= 0 else 0,
                   ">>": a >> b if b >= 0 else 0, "&": a & b, "|": a | b, "^": a ^ b,
                   "<": int(a < b), ">": int(a > b), "<=": int(a <= b), ">=": int(a >= b),
                   "==": int(a == b), "!=": int(a != b), "&&": int(bool(a and b)), "||": int(bool(a or b))}
            if expr.op in ("/", "%"):
                if b == 0:
                    raise LayoutError(f"{self.where(expr)}: {what} divides by zero")
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return q if expr.op == "/" else a - b * q
            if expr.op in ops:
                return ops[expr.op]
        if isinstance(expr, ast.TernaryOp):
            return self.const(expr.iftrue if self.const(expr.cond, what, sizeof) else expr.iffalse, what, sizeof)
        if isinstance(expr, ast.Cast):
            return self.const(expr.expr, what, sizeof)
        name = getattr(expr, "name", None)
        raise LayoutError(
            f"{self.where(expr)}: {what}: cannot evaluate "
            f"{repr(name) if isinstance(name, str) else type(expr).__name__} as an integer constant; "
            f"define it (#define or enum) before use"
        )


# -------------------------------------------------------------------------- types


class _Types:
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
        self.cache = {}

    def primitive(self, names, where):
        """The cffi type of a list of C type keywords (``['unsigned', 'long']``)."""
        words = [w for w in names if w not in ("const", "volatile")]
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
        unknown = [w for w in words if w not in ("unsigned", "signed", "long", "short", "char", "int",
                                                  "float", "double", "_Bool", "void")]
        if cname is None or unknown or (base is None and not (unsigned or signed or longs or "short" in words)):
            raise LayoutError(
                f"{where}: unknown type {' '.join(names)!r}; declare it (typedef) before use, or "
                f"include its header"
            )
        if unsigned and cname in ("char", "signed char", "short", "int", "long", "long long"):
            cname = "unsigned " + cname.replace("signed ", "")
        return self._prim(cname)

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

    def sizeof_expr(self, expr):
        ast = self.ast
        if isinstance(expr, ast.Typename):
            return self.b.sizeof(self.of(expr.type, self.p.where(expr), "sizeof"))
        raise LayoutError(f"{self.p.where(expr)}: sizeof of an expression is not supported here; use sizeof(type)")

    def of_enum(self, node):
        key = id(node)
        if key in self.records:
            return self.records[key]
        body = node if node.values is not None else self.p.tags.get(("enum", node.name))
        if body is None:
            raise LayoutError(f"{self.p.where(node)}: enum {node.name} is declared but never defined")
        names, values = [], []
        value = -1
        for e in body.values.enumerators:
            value = self.p.const(e.value, f"enumerator {e.name}") if e.value is not None else value + 1
            names.append(e.name)
            values.append(value)
        packed = "packed" in self.p.attrs.for_type(body.coord)
        lo, hi = min(values, default=0), max(values, default=0)
        for size in ((1, 2, 4, 8) if packed else (4, 8)):
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
                    width = self.p.const(decl.bitsize, "an unnamed bit-field width")
                    fields.append(("", self.of(decl.type, where, "(unnamed bit-field)"), width))
                    continue
                if not isinstance(decl.type, (self.ast.Struct, self.ast.Union)):
                    continue
                name = f"__anonymous_{len(self.anonymous)}"
                self.anonymous.add(name)
                member = self.of_record("struct" if isinstance(decl.type, self.ast.Struct) else "union",
                                        decl.type, None)
            else:
                member = self.of(decl.type, where, f"{record}.{name}")
                member_attrs = self.p.attrs.for_decl(decl.coord)
                if "packed" in attrs and "aligned" in member_attrs:
                    # GCC: packed members get alignment 1, but an explicit aligned(n) still
                    # holds (capped by #pragma pack).
                    member_attrs = {**member_attrs, "packed": None}
                    explicit_align.add(name)
                member = self._aligned(member, member_attrs, where, self.p.pack_of.get(key))
            bits = -1
            if decl.bitsize is not None:
                bits = self.p.const(decl.bitsize, f"the width of bit-field {name!r}")
            fields.append((name, member, bits))
            members.append((name, member, _spell(decl.type, self.p, bits), where))
        self._check_attrs(attrs, record, self.p.where(node))
        pack = self.p.pack_of.get(key)
        flags = (_SF_PACKED,) if "packed" in attrs or pack == 1 else ((0, pack) if pack else ())
        if (_SF_PACKED,) == flags and any(b == 0 for _, _, b in fields):
            raise LayoutError(
                f"{self.p.where(node)}: {record} is packed and has a zero-width bit-field (':0'), "
                f"which GCC aligns differently from cffi's layout engine (the one layouts uses); "
                f"layouts does not model it: remove the ':0' or the packing for this record")
        if pack and pack > 1 and any(b >= 0 for _, _, b in fields):
            raise LayoutError(
                f"{self.p.where(node)}: {record} has bit-fields under #pragma pack({pack}), which GCC "
                f"places differently from cffi's layout engine (the one layouts uses); layouts does "
                f"not model it: use pack 1 or __attribute__((packed)), or no pragma, for this record")
        if explicit_align and "packed" in attrs:
            if any(b >= 0 for _, _, b in fields):
                raise LayoutError(
                    f"{self.p.where(node)}: {record} is packed and mixes bit-fields with aligned() members, "
                    f"which layouts does not model; describe the record without one of them")
            fields = [(n, t if n in explicit_align else self._aligned(t, {"packed": None}, ""), b)
                      for n, t, b in fields]
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

    def _check_attrs(self, attrs, record, where):
        bad = sorted(set(attrs) & {"mode", "vector_size", "scalar_storage_order", "ms_struct"})
        if bad:
            raise LayoutError(f"{where}: {record} uses __attribute__(({bad[0]})), which layouts "
                              f"does not model; describe the record without it")

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


_CNAME = {"i1": "int8_t", "u1": "uint8_t", "i2": "int16_t", "u2": "uint16_t", "i4": "int32_t",
          "u4": "uint32_t", "i8": "int64_t", "u8": "uint64_t"}


def _alignment(arg, program, node):
    if arg is None:
        return 16  # GCC's largest alignment on x86-64 and aarch64
    try:
        value = int(_expand(arg, {k: str(v) for k, v in program.constants.items()}).strip(), 0)
    except ValueError:
        raise LayoutError(f"{program.where(node) if node else program.pre.main}: aligned({arg}) must be "
                          f"an integer constant") from None
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
    inner = getattr(node, "type", node)
    if isinstance(inner, ast.IdentifierType):
        base = " ".join(inner.names)
    elif isinstance(inner, (ast.Struct, ast.Union, ast.Enum)):
        base = f"{type(inner).__name__.lower()} {inner.name or '{...}'}"
    else:
        base = type(inner).__name__
    return f"{base}{stars}{dims}" + (f" :{bits}" if bits >= 0 else "")


# ------------------------------------------------------------------------ extract


class _Extract:
    """A cffi record type -> NumPy dtype + CInfo -> Layout."""

    def __init__(self, types, byteorder, unions, label):
        self.t, self.order = types, _BYTEORDERS[byteorder]
        self.unions, self.label = unions, label
        self.used_unions = set()
        self.ctypes, self.bits, self.enums = [], [], []

    def layout(self, ctype, filename, enum_as, bytes_as, flatten):
        dtype = self.record(ctype, ())
        unknown = set(self.unions) - self.used_unions
        if unknown:
            raise LayoutError(f"unions= names {sorted(unknown)}, which are not unions of {self.label}")
        if not dtype.names:
            raise LayoutError(f"{self.label} has no fields that hold data")
        info = CInfo(self.label, filename, tuple(self.ctypes), tuple(self.bits), tuple(self.enums), enum_as,
                     self.t.b.alignof(ctype))
        return Layout(dtype, bytes_as, flatten, "error", info)

    def record(self, ctype, path):
        """Structured dtype of a struct/union; leaves' C facts go to self.ctypes/bits/enums."""
        b = self.t.b
        names, formats, offsets = [], [], []
        keep = self._union_keep(ctype, path) if ctype.kind == "union" else None
        for name, member, spelling, where in self.t.members.get(ctype, []):
            field = dict(ctype.fields)[name]
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
                fmt, off = self.bitfield(leaf, field, member, b.sizeof(ctype), where)
            else:
                fmt, off = self.member(field.type, path + (name,), where), field.offset
            names.append(name)
            formats.append(fmt)
            offsets.append(off)
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": b.sizeof(ctype)})

    def _union_keep(self, ctype, path):
        member_names = [m[0] for m in self.t.members.get(ctype, [])]
        keys = [".".join(path)] if path and not path[-1].startswith("__anonymous_") else []
        keys += [".".join(path[:-1] + (m,)) if path and path[-1].startswith("__anonymous_") else m
                 for m in member_names]
        for key in keys:
            if key in self.unions:
                self.used_unions.add(key)
                chosen = self.unions[key]
                chosen = [chosen] if isinstance(chosen, str) else list(chosen)
                missing = [c for c in chosen if c not in member_names]
                if missing:
                    raise LayoutError(f"unions[{key!r}] names {missing}; the union's members are {member_names}")
                return set(chosen)
        return None

    def member(self, ctype, path, where):
        """NumPy dtype of a non-bit-field member."""
        b, name = self.t.b, ".".join(path)
        ctype = self.t.unwrap.get(ctype, ctype)
        shape = []
        while ctype.kind == "array":
            shape.append(ctype.length)
            ctype = ctype.item
        ctype = self.t.unwrap.get(ctype, ctype)
        if ctype.kind in ("struct", "union"):
            base = self.record(ctype, path)
        elif ctype.kind == "primitive" and ctype.cname == "char" and shape:
            base, shape = np.dtype(f"S{shape[-1]}"), shape[:-1]
        else:
            base = self.scalar(ctype, name, where)
        if shape and 0 in shape:
            return np.dtype((np.void, 0))
        return np.dtype((base, tuple(shape))) if shape else base

    def scalar(self, ctype, name, where):
        b = self.t.b
        if ctype in self.t.enums:
            enumerators, dtype = self.t.enums[ctype]
            self.enums.append((name, enumerators))
            return dtype.newbyteorder(self.order) if dtype.itemsize > 1 else dtype
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

    def bitfield(self, leaf, field, member, record_size, where):
        """Container word dtype and offset of a bit-field; records its CInfo row."""
        b = self.t.b
        value_type = field.type
        if value_type in self.t.enums:
            value = self.t.enums[value_type][1]
        else:
            value = _numpy_of(value_type.cname, b.sizeof(value_type))
        nbits = field.bitsize
        # The field's first bit, counted from the record's start. GCC allocates bit-fields
        # at the same bit numbers on big-endian targets; only the numbering differs (bit 0
        # is then the most significant bit of byte 0), which the shift below accounts for.
        p = 8 * field.offset + field.bitshift
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
        big = self.order == ">" or (self.order == "=" and sys.byteorder == "big")
        shift = 8 * width - first - nbits if big else first
        signed = value.kind == "i"
        order = "|" if width == 1 else ("big" if big else "little")
        self.bits.append((leaf, shift, nbits, signed, first, value.str if value.kind != "b" else "?", order))
        if width not in (1, 2, 4, 8):
            return np.dtype(f"V{width}"), start
        container = np.dtype(f"u{width}")
        return (container.newbyteorder(self.order) if width > 1 else container), start


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
