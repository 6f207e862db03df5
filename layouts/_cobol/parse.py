"""Tokens -> the tree of data description entries (levels, names and clauses).

Each entry is an :class:`Item`; its children are the entries of higher level numbers
that follow it. Clauses that change neither offsets nor values (``VALUE``, ``GLOBAL``,
``EXTERNAL``, ``INDEXED BY``, ``ASCENDING KEY``) are read and dropped; 88-level
condition names are kept on the item before them. Anything else is a ``LayoutError``
naming the copybook line.
"""

import re
from dataclasses import dataclass, field

from .._errors import LayoutError
from .lexer import Source, Token

__all__ = ["Item", "parse"]

# USAGE words -> the usage they mean.
USAGES = {
    "DISPLAY": "display",
    "COMP": "binary",
    "COMPUTATIONAL": "binary",
    "COMP-0": "binary",
    "COMPUTATIONAL-0": "binary",
    "COMP-4": "binary",
    "COMPUTATIONAL-4": "binary",
    "BINARY": "binary",
    "COMP-5": "native",
    "COMPUTATIONAL-5": "native",
    "COMP-3": "packed",
    "COMPUTATIONAL-3": "packed",
    "PACKED-DECIMAL": "packed",
    "COMP-1": "float",
    "COMPUTATIONAL-1": "float",
    "COMP-2": "double",
    "COMPUTATIONAL-2": "double",
}
# USAGE words that name something a record cannot be read as: why, for the message.
_UNSUPPORTED_USAGES = {
    "INDEX": "an index is an address-like value of the running program",
    "POINTER": "a pointer is an address in the program that wrote the record",
    "PROCEDURE-POINTER": "a pointer is an address in the program that wrote the record",
    "FUNCTION-POINTER": "a pointer is an address in the program that wrote the record",
    "NATIONAL": "national (UTF-16) items are not supported yet",
    "DISPLAY-1": "DBCS (DISPLAY-1) items are not supported yet",
    "COMP-6": "COMP-6 (unsigned packed) is not supported yet",
    "COMPUTATIONAL-6": "COMP-6 (unsigned packed) is not supported yet",
    "COMP-X": "COMP-X is not supported",
    "COMP-N": "COMP-N is not supported",
    "OBJECT": "object references are addresses in the running program",
}
_FIGURATIVE = {
    "ZERO",
    "ZEROS",
    "ZEROES",
    "SPACE",
    "SPACES",
    "HIGH-VALUE",
    "HIGH-VALUES",
    "LOW-VALUE",
    "LOW-VALUES",
    "QUOTE",
    "QUOTES",
    "NULL",
    "NULLS",
    "ALL",
}
_DIGITS = re.compile(r"[0-9]+")  # str.isdigit() takes "¹" and "٣", which int() refuses
_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9_])?$")


@dataclass
class Item:
    """One data description entry (levels 01-49, 66, 77) of the copybook."""

    level: int
    name: str  # as written ("FILLER" for unnamed)
    line: int
    picture: str = ""
    usage: str = ""  # "" (inherit / display), or a value of USAGES
    usage_word: str = ""
    occurs: tuple = ()  # (min, max) or ()
    depending_on: str = ""
    redefines: str = ""
    sign: str = ""  # "", "leading", "trailing", "leading separate", "trailing separate"
    sync: bool = False
    blank_when_zero: bool = False
    justified: bool = False
    conditions: list = field(default_factory=list)  # [(name, [values as written])]
    raw: bool = False  # a FILLER kept as its bytes (fillers="keep")
    children: list = field(default_factory=list)
    parent: "Item | None" = field(default=None, repr=False)

    @property
    def is_filler(self) -> bool:
        return self.name.upper() == "FILLER"

    @property
    def is_group(self) -> bool:
        return bool(self.children) or (not self.picture and self.usage not in ("float", "double"))


class _Entry:
    """The tokens of one entry (up to its period), read left to right."""

    def __init__(self, tokens, source):
        self.tokens, self.i, self.source = tokens, 0, source

    def peek(self, ahead=0):
        j = self.i + ahead
        return self.tokens[j].upper if j < len(self.tokens) else ""

    def take(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def at_end(self):
        return self.i >= len(self.tokens)

    def fail(self, why, line=None):
        line = line if line is not None else self.tokens[min(self.i, len(self.tokens) - 1)].line
        return LayoutError(f"{self.source.where(line)}: {why}")

    def optional(self, *words):
        if self.peek() in words:
            self.i += 1
            return True
        return False

    def expect_word(self, what):
        if self.at_end():
            raise self.fail(f"{what} expected before the period")
        return self.take()


# Compiler-directing statements of the listing (IBM COBOL): they change no byte, and may stand
# between entries without a period
_LISTING_CONTROL = {"EJECT", "SKIP1", "SKIP2", "SKIP3"}


def _entries(tokens, source):
    """Split the token list at periods; an entry missing its period is an error."""
    current = []
    for token in tokens:
        if token.text == ".":
            if current:
                yield _Entry(current, source)
            current = []
        else:
            current.append(token)
    if current:
        raise LayoutError(f"{source.where(current[-1].line)}: the entry has no closing period; end it with '.'")


def parse(tokens: list, source: Source) -> list:
    """The top-level items (01 and 77 levels) of the copybook, each with its subtree."""
    roots: list = []
    stack: list = []
    last = None
    tokens = [t for t in tokens if t.upper not in _LISTING_CONTROL]
    for entry in _entries(tokens, source):
        first = entry.take()
        if first.upper in ("COPY", "REPLACE", "INCLUDE", "EXEC"):
            raise entry.fail(
                f"a {first.upper} statement: this reader does not expand it; put the text it stands for "
                f"(the copybook {first.upper} names) in its place",
                first.line,
            )
        if not _DIGITS.fullmatch(first.text):
            raise entry.fail(
                f"an entry starts with a level number (01-49, 66, 77, 88), found {first.text!r}", first.line
            )
        level = int(first.text)
        if level == 88:
            if last is None:
                raise entry.fail("an 88-level condition name needs a data item before it", first.line)
            name, values = _condition(entry)
            twice = [n for n, _ in last.conditions if n.upper().replace("_", "-") == name.upper().replace("_", "-")]
            if twice:
                raise entry.fail(
                    f"88-level {name} is written twice under {last.name}: one name would stand for two "
                    f"conditions of one item (and a reference to it is ambiguous in COBOL); rename one, or join "
                    f"their values in one VALUE clause",
                    first.line,
                )
            last.conditions.append((name, values))
            continue
        if level == 66:
            raise entry.fail(
                "66-level RENAMES is not supported; describe the renamed bytes with a REDEFINES group instead",
                first.line,
            )
        if not (1 <= level <= 49 or level == 77):
            raise entry.fail(f"level number {level} is not one of 01-49, 66, 77, 88", first.line)
        item = _item(entry, level, first.line)
        _place(item, stack, roots, entry)
        last = item
    if not roots:
        raise LayoutError(f"{source.origin} has no data description entries (01-49 or 77 levels)")
    return roots


def _place(item, stack, roots, entry):
    """Attach ``item`` under the nearest open item of a lower level number."""
    if item.level in (1, 77):
        stack.clear()
        roots.append(item)
        stack.append(item)
        return
    while stack and stack[-1].level >= item.level:
        stack.pop()
    if not stack:  # a copybook of 05-level items with no 01 above them: each is a record
        roots.append(item)
        stack.append(item)
        return
    parent = stack[-1]
    if parent.level == 77:
        raise entry.fail(
            f"a 77-level item has no subordinate items, but {item.name} follows it at level {item.level:02d}", item.line
        )
    siblings = parent.children
    if siblings and siblings[-1].level != item.level:
        raise entry.fail(
            f"level {item.level:02d} matches no open level (the item before it at this depth is "
            f"level {siblings[-1].level:02d} {siblings[-1].name}); give sibling items the same "
            f"level number",
            item.line,
        )
    if parent.picture or parent.usage in ("float", "double"):
        raise entry.fail(
            f"{parent.name} has a PICTURE (or is COMP-1/COMP-2), so it is an elementary item and "
            f"cannot hold {item.name}",
            item.line,
        )
    item.parent = parent
    siblings.append(item)
    stack.append(item)


def _condition(entry):
    name = entry.expect_word("a condition name").text
    if not entry.optional("VALUE", "VALUES"):
        raise entry.fail(f"88-level {name} needs VALUE")
    entry.optional("IS", "ARE")
    values = []
    while not entry.at_end():
        token = entry.take()
        if not _is_value(token.text):  # an entry's words: the period before it is missing
            raise entry.fail(
                f"88-level {name}: {token.text!r} is no value (a literal, a figurative constant such as "
                f"SPACES, or THRU); end the 88 entry with a period before the next entry",
                token.line,
            )
        if token.upper in ("THRU", "THROUGH"):
            values.append(token.upper)
        else:
            values.append(token.text)
    if not values:
        raise entry.fail(f"88-level {name}: VALUE has no values")
    return name, values


# what an 88 level's VALUE clause may hold besides literals (WHEN SET TO FALSE is read as values)
_VALUE_WORDS = {
    "ZERO", "ZEROS", "ZEROES", "SPACE", "SPACES", "HIGH-VALUE", "HIGH-VALUES", "LOW-VALUE", "LOW-VALUES",
    "QUOTE", "QUOTES", "NULL", "NULLS", "ALL", "THRU", "THROUGH", "WHEN", "SET", "TO", "FALSE", "IS", "ARE",
}  # fmt: skip
_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d*)?|[.,]\d+)(E[+-]?\d+)?$", re.I)


def _is_value(text):
    """Whether a word of an 88 level's VALUE clause is one: a quoted literal (also X'..', N'..'),
    a number, or a figurative constant or keyword of the clause."""
    quoted = text[:1] in "'\"" or (len(text) > 1 and text[0] in "XxNnGgBbZz" and text[1] in "'\"")
    return quoted or bool(_NUMBER.match(text)) or text.upper() in _VALUE_WORDS


def _item(entry, level, line):
    name = "FILLER"
    if not entry.at_end() and _is_name(entry.peek()) and entry.peek() not in _CLAUSE_WORDS:
        token = entry.take()
        name = token.text
        if not _NAME.match(name):
            raise entry.fail(
                f"{name!r} is not a COBOL data name (letters, digits and hyphens, not starting or "
                f"ending with a hyphen)",
                token.line,
            )
    item = Item(level, name, line)
    while not entry.at_end():
        _clause(entry, item)
    return item


def _is_name(word):
    return bool(word) and word[0] not in "'\"" and any(c.isalpha() for c in word)


def _clause(entry, item):
    word = entry.peek()
    token = entry.take()
    if word in ("PIC", "PICTURE"):
        if item.picture:
            raise entry.fail(f"{item.name} has two PICTURE clauses", token.line)
        entry.optional("IS")
        item.picture = entry.expect_word("a PICTURE string").text.upper()
    elif word == "USAGE":
        entry.optional("IS")
        _usage(entry, item, entry.expect_word("a USAGE (DISPLAY, COMP, COMP-3...)"))
    elif word in USAGES or word in _UNSUPPORTED_USAGES:
        _usage(entry, item, token)
    elif word in ("OCCURS",):
        _occurs(entry, item)
    elif word == "REDEFINES":
        item.redefines = entry.expect_word("the name of the item redefined").text
    elif word in ("SIGN", "LEADING", "TRAILING"):
        if item.sign:
            raise entry.fail(f"{item.name} has two SIGN clauses", token.line)
        if word == "SIGN":
            entry.optional("IS")
            word = entry.expect_word("LEADING or TRAILING").upper
        if word not in ("LEADING", "TRAILING"):
            raise entry.fail(f"SIGN is LEADING or TRAILING, found {word!r}")
        separate = entry.optional("SEPARATE")
        if separate:
            entry.optional("CHARACTER")
        item.sign = word.lower() + (" separate" if separate else "")
    elif word in ("SYNC", "SYNCHRONIZED"):
        item.sync = True
        entry.optional("LEFT", "RIGHT")
    elif word in ("VALUE", "VALUES"):
        entry.optional("IS", "ARE")
        _skip_literals(entry)
    elif word == "BLANK":
        entry.optional("WHEN")
        if not entry.optional("ZERO", "ZEROS", "ZEROES"):
            raise entry.fail("BLANK WHEN ZERO expected")
        item.blank_when_zero = True
    elif word in ("JUSTIFIED", "JUST"):
        item.justified = True
        entry.optional("RIGHT")
    elif word in ("GLOBAL", "EXTERNAL"):
        pass
    elif word == "IS" and entry.peek() in ("GLOBAL", "EXTERNAL"):
        entry.take()
    elif word == "RENAMES":
        raise entry.fail("RENAMES is not supported")
    else:
        raise entry.fail(
            f"{token.text!r} is not a clause this reader supports (PIC, USAGE, OCCURS, REDEFINES, "
            f"SIGN, SYNC, VALUE, BLANK WHEN ZERO, JUSTIFIED); remove it if it does not change the "
            f"record's bytes",
            token.line,
        )


_CLAUSE_WORDS = {
    "PIC",
    "PICTURE",
    "USAGE",
    "OCCURS",
    "REDEFINES",
    "SIGN",
    "LEADING",
    "TRAILING",
    "SYNC",
    "SYNCHRONIZED",
    "VALUE",
    "VALUES",
    "BLANK",
    "JUSTIFIED",
    "JUST",
    "GLOBAL",
    "EXTERNAL",
    "IS",
    "RENAMES",
    *USAGES,
    *_UNSUPPORTED_USAGES,
}


def _usage(entry, item, token):
    word = token.upper
    if word in _UNSUPPORTED_USAGES:
        raise entry.fail(f"USAGE {token.text} is not supported: {_UNSUPPORTED_USAGES[word]}", token.line)
    if word not in USAGES:
        raise entry.fail(
            f"{token.text!r} is not a USAGE this reader supports ({', '.join(sorted(USAGES))})", token.line
        )
    if item.usage and item.usage != USAGES[word]:
        raise entry.fail(f"{item.name} has two USAGE clauses", token.line)
    item.usage, item.usage_word = USAGES[word], word


def _int(entry, what):
    token = entry.expect_word(what)
    if not _DIGITS.fullmatch(token.text):
        raise entry.fail(f"{what} expected, found {token.text!r}", token.line)
    if len(token.text) > 9:
        raise entry.fail(f"{what} {token.text} is too large", token.line)
    return int(token.text)


def _occurs(entry, item):
    if item.occurs:
        raise entry.fail(f"{item.name} has two OCCURS clauses")
    if item.level in (1, 77):
        raise entry.fail(
            f"OCCURS on a level {item.level:02d} item: COBOL repeats items below a record, not the record "
            f"(each record of the file is one {item.name}); put the table in a group below it"
        )
    low = high = _int(entry, "the OCCURS count")
    span = f"{low}"
    if entry.optional("TO"):
        high = _int(entry, "the OCCURS maximum")
        if high < low:
            raise entry.fail(f"OCCURS {low} TO {high}: the maximum is below the minimum")
        span = f"{low} TO {high}"
    if high == 0:  # (IBM: the maximum is at least 1)
        raise entry.fail(
            f"OCCURS {span}: a table of at most 0 elements holds nothing; "
            f"give its maximum (at least 1), or remove the item"
        )
    entry.optional("TIMES")
    if entry.optional("DEPENDING"):
        entry.optional("ON")
        item.depending_on = entry.expect_word("the name of the DEPENDING ON count").text
    elif low != high:
        raise entry.fail(f"OCCURS {low} TO {high} needs DEPENDING ON (the field that holds the count)")
    item.occurs = (low, high)
    while entry.peek() in ("ASCENDING", "DESCENDING", "INDEXED"):
        if entry.take().upper == "INDEXED":
            entry.optional("BY")
        else:
            entry.optional("KEY")
            entry.optional("IS")
        names = 0
        while not entry.at_end() and entry.peek() not in _CLAUSE_WORDS | {"ASCENDING", "DESCENDING", "INDEXED"}:
            entry.take()
            names += 1
        if not names:
            raise entry.fail("ASCENDING/DESCENDING KEY and INDEXED BY need at least one name")


def _skip_literals(entry):
    """A VALUE clause's literals (quoted, numeric, figurative, ``ALL 'x'``, ``THRU``)."""
    taken = 0
    while not entry.at_end():
        word = entry.peek()
        if (
            word[:1] in "'\""
            or _NUMBER.match(word)
            or word in _FIGURATIVE
            or word in ("THRU", "THROUGH")
            or (word[:1] in "XNGZB" and word[1:2] in "'\"")
        ):
            entry.take()
            taken += 1
        else:
            break
    if not taken:
        raise entry.fail("VALUE has no literal")
