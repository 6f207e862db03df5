"""GNU ``__attribute__((...))`` lists: lifted out of the text, remembered by position."""

import re

_IGNORED_TOKENS = re.compile(r"\b(__extension__|__restrict__|__restrict|__inline__|__inline|__volatile__)\b")
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


def lift_attributes(text):
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
        marks = [brace] + (
            [brace - 1, brace - 2]
            if ident(brace - 1) and word(brace - 2) in _TAGGED
            else [brace - 1]
            if word(brace - 1) in _TAGGED
            else []
        )
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
