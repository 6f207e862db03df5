"""The parsed source: typedefs, struct/union/enum definitions, constants, pragmas."""

import re

from .._errors import LayoutError


class Program:
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
