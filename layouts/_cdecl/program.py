"""The parsed source: typedefs, struct/union/enum definitions, constants, pragmas."""

import re

from .._errors import LayoutError

# Types GCC knows and pycparser does not: declared as typedef names so the text parses;
# :mod:`.types` gives each its size, alignment and NumPy type. ``__builtin_va_list`` and
# friends let glibc's <stdio.h>, <stdarg.h> and <wchar.h> parse.
SPECIAL_TYPES = (
    "__int128_t",
    "__uint128_t",
    "_Float16",
    "_Float32",
    "_Float64",
    "_Float128",
    "_Float32x",
    "_Float64x",
    "__float128",
    "__float80",
    "__ibm128",
    "__bf16",
    "__fp16",
    "__builtin_va_list",
)
PRELUDE = "".join(f"typedef int {name};" for name in SPECIAL_TYPES) + '\n# 1 "<pre>"\n'


class Program:
    """Typedefs, struct/union/enum definitions, enum constants and pragmas of a source."""

    def __init__(self, text, attrs, pre, pack):
        from pycparser import c_ast, c_parser

        self.ast_mod, self.attrs, self.pre = c_ast, attrs, pre
        self.sizeof = None  # sizeof(type) in constant expressions: set by Types
        try:
            tree = c_parser.CParser().parse(PRELUDE + text, filename="<pre>")
        except c_parser.ParseError as err:
            m = re.match(r"<pre>:(\d+):(\d+): (.*)", str(err))
            if m:
                raise LayoutError(
                    f"{pre.where(int(m.group(1)), int(m.group(2)))}: C syntax error {m.group(3)}"
                ) from None
            raise LayoutError(
                f"{pre.main}: C syntax error: {str(err).replace('<pre>: ', '')} (is a type name used "
                f"before its typedef or #include?)"
            ) from None
        except RecursionError:
            raise LayoutError(
                f"{pre.main}: the declarations nest too deeply for the parser; flatten the "
                f"nesting, or let the C compiler lay them out (compiler='auto')"
            ) from None
        self.typedefs, self.tags, self.constants = {}, {}, {}
        self._pending, self._evaluating = {}, set()
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
        if numbers and numbers[0] not in (1, 2, 4, 8, 16):
            return  # GCC ignores (with a warning) a value that is not a small power of two
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
            for e in self.enumerators(node):  # evaluated when first used: sizeof needs the types
                self._pending[e.name] = node

    def enumerators(self, node):
        """The enumerators of an enum (without the pragmas pycparser keeps among them)."""
        return [e for e in node.values.enumerators if isinstance(e, self.ast_mod.Enumerator)]

    def all_constants(self):
        """Every enumerator's value (evaluating those not used yet)."""
        for name in list(self._pending):
            if name not in self.constants:
                self.enum_values(self._pending[name])
        return self.constants

    def enum_values(self, node):
        """``[(name, value)]`` of an enum's enumerators."""
        out, value = [], -1
        for e in self.enumerators(node):
            if e.name in self.constants:
                value = self.constants[e.name]
            else:
                value = self.const(e.value, f"enumerator {e.name}") if e.value is not None else value + 1
                if e.name in self._pending:
                    self.constants[e.name] = value
            out.append((e.name, value))
        return out

    def names(self):
        """One name per record defined in the main source, in source order."""
        named = self._named()
        first = {}
        for label, (_, node) in named.items():  # tags come before typedef names
            first.setdefault(id(node), label)
        order = sorted(
            first.items(),
            key=lambda kv: next((n.coord.line, n.coord.column) for _, n in named.values() if id(n) == kv[0]),
        )
        return [label for _, label in order]

    def _named(self, main_only=True):
        ast = self.ast_mod
        named = {}
        for key, node in self.tags.items():
            if key[0] != "enum" and (not main_only or self.pre.in_main(node.coord.line)):
                named[f"{key[0]} {key[1]}"] = (key[0], node)
        for tname, td in self.typedefs.items():
            target = self.resolve_typedef(td.type)
            if (
                isinstance(target, (ast.Struct, ast.Union))
                and td.coord is not None
                and (not main_only or self.pre.in_main(td.coord.line))
            ):
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
        if not isinstance(name, str):
            raise LayoutError(f"name must be a str such as 'struct tick', got {type(name).__name__}")
        key = " ".join(name.split())
        everything = self._named(main_only=False)
        if key.startswith("enum "):
            raise LayoutError(f"{name!r} is an enum, not a record; name the struct or union that holds it")
        if key.startswith(("struct ", "union ")):
            if key in everything:
                return (*everything[key], key)
        else:
            if key in self.typedefs and key not in everything:
                target = self.resolve_typedef(self.typedefs[key].type)
                raise LayoutError(
                    f"{self.where(self.typedefs[key])}: {key!r} is a typedef of "
                    f"{type(target).__name__ if not hasattr(target, 'names') else ' '.join(target.names)}"
                    f", not of a struct or union; name the record type that holds the data"
                )
            found = {}
            for candidate in (key, f"struct {key}", f"union {key}"):
                if candidate in everything:
                    found.setdefault(id(everything[candidate][1]), candidate)
            if len(found) == 1:
                label = next(iter(found.values()))
                return (*everything[label], label)
            if found:
                raise LayoutError(ambiguous(key, found.values()))
        more = len(set(everything) - set(named))
        raise LayoutError(
            f"no struct or union named {name!r} in {self.pre.main}; it defines: "
            f"{', '.join(sorted(named)) or 'none'}"
            + (f" (and {more} more from the headers it includes)" if more else "")
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
        """Evaluate an integer constant expression (array sizes, bit widths, enums), with
        C's 64-bit limits: a value beyond them is an error, never a huge Python int."""
        value = self._const(expr, what, sizeof or self.sizeof, 0)
        return value

    def _const(self, expr, what, sizeof, depth):
        ast = self.ast_mod
        if depth > 200:
            raise LayoutError(f"{self.where(expr)}: {what}: the expression nests more than 200 deep")
        ev = lambda e: self._const(e, what, sizeof, depth + 1)  # noqa: E731
        if isinstance(expr, ast.Constant):
            if expr.type == "char":
                body = expr.value[1:-1]
                try:
                    return ord(body.encode().decode("unicode_escape")[:1] or "\0") if body else 0
                except (UnicodeError, ValueError):
                    raise LayoutError(f"{self.where(expr)}: {what}: cannot read the character {expr.value}") from None
            if expr.type not in (
                "int",
                "unsigned int",
                "long int",
                "unsigned long int",
                "long long int",
                "unsigned long long int",
            ):
                raise LayoutError(f"{self.where(expr)}: {what} must be an integer constant, got {expr.value}")
            digits = re.sub(r"[uUlL]+$", "", expr.value)
            try:
                value = int(digits, 8) if re.fullmatch(r"0\d+", digits) else int(digits, 0)
            except ValueError:
                raise LayoutError(f"{self.where(expr)}: {what}: {expr.value} is not an integer constant") from None
            return self._fit(value, expr, what)
        if isinstance(expr, ast.ID):
            if expr.name in self.constants:
                return self.constants[expr.name]
            if expr.name in self._pending:
                if expr.name in self._evaluating:
                    raise LayoutError(f"{self.where(expr)}: {what}: enumerator {expr.name} is used in its own value")
                self._evaluating.add(expr.name)
                try:
                    self.enum_values(self._pending[expr.name])
                finally:
                    self._evaluating.discard(expr.name)
                if expr.name in self.constants:
                    return self.constants[expr.name]
        if isinstance(expr, ast.UnaryOp):
            if expr.op in ("sizeof", "_Alignof", "alignof", "__alignof__") and sizeof is not None:
                return sizeof(expr.expr, align=expr.op != "sizeof")
            if expr.op in ("-", "+", "~", "!"):
                v = ev(expr.expr)
                return self._fit({"-": -v, "+": v, "~": ~v, "!": int(not v)}[expr.op], expr, what)
        if isinstance(expr, ast.BinaryOp):
            op = expr.op
            a = ev(expr.left)
            if op in ("&&", "||"):  # short-circuit, as C does
                if (op == "&&" and not a) or (op == "||" and a):
                    return int(bool(a))
                return int(bool(ev(expr.right)))
            b = ev(expr.right)
            if op in ("<<", ">>"):
                if b < 0 or b >= 64:
                    raise LayoutError(
                        f"{self.where(expr)}: {what}: shift by {b} is outside 0..63 (C's largest integers have 64 bits)"
                    )
                return self._fit(a << b if op == "<<" else a >> b, expr, what)
            if op in ("/", "%"):
                if b == 0:
                    raise LayoutError(f"{self.where(expr)}: {what} divides by zero")
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return q if op == "/" else a - b * q
            ops = {
                "+": lambda: a + b,
                "-": lambda: a - b,
                "*": lambda: a * b,
                "&": lambda: a & b,
                "|": lambda: a | b,
                "^": lambda: a ^ b,
                "<": lambda: int(a < b),
                ">": lambda: int(a > b),
                "<=": lambda: int(a <= b),
                ">=": lambda: int(a >= b),
                "==": lambda: int(a == b),
                "!=": lambda: int(a != b),
            }
            if op in ops:
                return self._fit(ops[op](), expr, what)
        if isinstance(expr, ast.TernaryOp):
            return ev(expr.iftrue if ev(expr.cond) else expr.iffalse)
        if isinstance(expr, ast.Cast):
            return ev(expr.expr)
        name = getattr(expr, "name", None)
        raise LayoutError(
            f"{self.where(expr)}: {what}: cannot evaluate "
            f"{repr(name) if isinstance(name, str) else type(expr).__name__} as an integer constant; "
            f"define it (#define or enum) before use"
        )

    def _fit(self, value, expr, what):
        if not -(2**63) <= value < 2**64:
            raise LayoutError(
                f"{self.where(expr)}: {what}: the value does not fit in 64 bits (as C's "
                f"unsigned long long); check the expression"
            )
        return value


def ambiguous(name, labels):
    """The message for a bare name that is both a tag and a typedef of another record."""
    shown = sorted(label if label != name else f"typedef {name}" for label in labels)
    tag = next((label for label in shown if not label.startswith("typedef ")), f"struct {name}")
    return f"{name!r} is ambiguous: it names {' and '.join(shown)}; pass {tag!r} for the tag, or rename one of them"
