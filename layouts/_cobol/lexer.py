"""Copybook text -> tokens, each knowing the copybook line it came from.

COBOL source comes in two formats:

- **fixed** (the reference format every mainframe copybook uses): columns 1-6 are a
  sequence area and 73-80 an identification area, both ignored; column 7 is the
  indicator (``*`` and ``/`` comment lines, ``-`` continuation, ``D`` debugging lines,
  treated as comments); the code is in columns 8-72.
- **free**: the whole line is code; ``*>`` starts a comment anywhere, a line whose first
  non-blank character is ``*`` or ``/`` is a comment.

``"auto"`` chooses free when some code line has a level number starting before column 8
(which fixed format would cut), and fixed otherwise. Tabs are expanded to 8 columns first
(as editors show them), so tab-indented fixed-format copybooks keep their columns.
"""

import os
import pathlib
import re
from dataclasses import dataclass

from .._errors import LayoutError
from .._regular import open_regular

__all__ = ["Source", "Token", "read_source", "tokenize"]

_FORMATS = ("auto", "fixed", "free")
_SUFFIXES = (".cob", ".cbl", ".cpy", ".copy", ".copybook")  # as the command's
_LEVEL_START = re.compile(r"^(\s*)(\d{1,2})(\s|\.|$)")
_LITERAL = re.compile(r"""("([^"]|"")*"|'([^']|'')*')""")


@dataclass(frozen=True)
class Token:
    """One word of the copybook (a literal keeps its quotes), with its line number."""

    text: str
    line: int

    @property
    def upper(self) -> str:
        return self.text.upper()


@dataclass(frozen=True)
class Source:
    """The copybook's lines (as written, for messages) and where they came from."""

    lines: tuple
    origin: str

    def where(self, line: int) -> str:
        """``"copybook line 12: '05 A PIC Q.'"``: the place a message names."""
        text = self.lines[line - 1].rstrip() if 0 < line <= len(self.lines) else ""
        return f"{self.origin} line {line}: {text.strip()!r}"


def read_source(src) -> Source:
    """Copybook text, or the path of a copybook file (``str`` without a newline that
    names an existing file, or any ``os.PathLike``)."""
    if isinstance(src, str) and _names_a_file(src) and not os.path.isfile(src):
        src = pathlib.Path(src)  # not there: the error below says so, never "column 7 holds ..."
    if isinstance(src, os.PathLike) or (isinstance(src, str) and "\n" not in src and os.path.isfile(src)):
        path = os.fspath(src)
        if os.path.isdir(path):
            raise LayoutError(f"the copybook {path!r} is a directory; give the copybook file's path (or its text)")
        if not os.path.exists(path):
            raise LayoutError(
                f"the copybook {path!r}: no such file; give the path of a copybook file that exists (or "
                f"the copybook's text)"
            )
        try:
            with open_regular(path, "give the copybook file's path (or its text)") as f:  # (a FIFO: never a hang)
                raw = f.read()
        except OSError as err:
            raise LayoutError(f"cannot read the copybook {path!r}: {err.strerror}") from err
        if b"\0" in raw:
            raise LayoutError(
                f"{path!r} holds NUL bytes: it is not copybook text (a data file given as the "
                f"copybook?); pass the copybook's path"
            )
        _refuse_ebcdic(raw, path)
        text, origin = raw.decode("utf-8", errors="replace"), os.path.basename(path)
    elif isinstance(src, bytes):
        text, origin = src.decode("utf-8", errors="replace"), "copybook"
    elif isinstance(src, str):
        text, origin = src, "copybook"
    else:
        raise LayoutError(f"a copybook is text or a path, got {type(src).__name__}")
    return Source(tuple(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")), origin)


def _refuse_ebcdic(raw, path):
    """A copybook file in EBCDIC (as a mainframe keeps it, moved in binary): its bytes read
    as UTF-8 are noise (an error on line 1 about column 7), so say what it is."""
    try:
        raw.decode("utf-8")
        return
    except UnicodeDecodeError:
        pass
    text = raw.decode("cp037").upper()
    if re.search(r"\b(PIC|PICTURE|COMP-3|OCCURS|REDEFINES)\b", text):
        raise LayoutError(
            f"{path!r} is EBCDIC text (cp037), not ASCII or UTF-8: convert it first (iconv -f IBM-037 "
            f"-t UTF-8, or transfer it in text mode), or pass its text: "
            f"Layout.from_copybook(raw.decode('cp037'))"
        )


def _names_a_file(text):
    """A one-line string that can only be a file's name: copybook text has entries that
    end with periods and words apart, so a line with a copybook suffix or no blank in it,
    and no period at its end, is a path (``01 R. 05 A PIC X. *> a/b`` is text)."""
    line = text.strip()
    if not line or "\n" in text or line.endswith("."):
        return False
    return line.lower().endswith(_SUFFIXES) or not any(c.isspace() for c in line)


def _choose_format(lines, source_format):
    if source_format not in _FORMATS:
        raise LayoutError(f"source_format must be one of {_FORMATS}, got {source_format!r}")
    if source_format != "auto":
        return source_format
    for line in (raw.expandtabs(8) for raw in lines):
        if len(line) > 6 and line[6] in "*/":
            continue
        m = _LEVEL_START.match(line)
        if m and len(m.group(1)) < 7 and not line.lstrip().startswith("*"):
            if re.fullmatch(r"[0-9]+", line[:6].strip()) and line[6:7] == " " and _LEVEL_START.match(line[7:]):
                return "fixed"  # a sequence number (columns 1-6) before a level number in column 8+
            return "free"
    return "fixed"


def _code_areas(source, fmt):
    """``[(line number, code text, continues previous)]`` of the lines that hold code."""
    out = []
    for number, raw in enumerate(source.lines, start=1):
        line = raw.expandtabs(8)
        if fmt == "fixed":
            indicator = line[6:7]
            if indicator in ("*", "/", "D", "d"):
                continue
            if indicator not in ("", " ", "-"):
                raise LayoutError(
                    f"{source.where(number)}: column 7 holds {indicator!r}; in fixed format it is the "
                    f"indicator (' ', '*', '/', '-' or 'D'); if the copybook is free-format text pass "
                    f"source_format='free'"
                )
            code = line[7:72]
            code = code[: _comment_start(code)]  # *> floating comments (IBM Enterprise COBOL 5.2+)
            out.append((number, code, indicator == "-"))
        else:
            stripped = line.lstrip()
            if stripped.startswith(("*", "/")):
                continue
            cut = _comment_start(line)
            out.append((number, line[:cut], False))
    return out


def _comment_start(line):
    """Where a ``*>`` comment starts (outside literals), or the line's end."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif line.startswith("*>", i):
            return i
    return len(line)


def _join_continuations(areas, source):
    """Lines with a ``-`` indicator continue the line before: an open literal resumes
    after the continuation's first quote (the literal ran to column 72), anything else
    resumes at its first non-blank character."""
    joined = []  # [(text, [(position in text, line number)])]
    for number, code, continues in areas:
        if not continues:
            joined.append([code, [(0, number)]])
            continue
        if not joined:
            raise LayoutError(f"{source.where(number)}: a continuation line ('-' in column 7) with no line before it")
        text, marks = joined[-1]
        body = code.lstrip()
        if _open_quote(text):
            if not body or body[0] not in "'\"":
                raise LayoutError(
                    f"{source.where(number)}: continues an open literal, so its text must start with a quote"
                )
            text, body = text.ljust(65), body[1:]
        else:
            text = text.rstrip()
        marks.append((len(text), number))
        joined[-1] = [text + body, marks]
    return joined


def _open_quote(text):
    quote = None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
    return quote


def tokenize(source: Source, source_format: str = "auto") -> list:
    """The copybook's words and periods (``Token(".")`` ends an entry), comments,
    sequence and identification areas removed."""
    fmt = _choose_format(source.lines, source_format)
    tokens = []
    for text, marks in _join_continuations(_code_areas(source, fmt), source):
        for start, word in _words(text, source, marks):
            line = max(n for pos, n in marks if pos <= start)
            if word.endswith(".") and not word.startswith(("'", '"')) or word == ".":
                if len(word) > 1:
                    tokens.append(Token(word[:-1].rstrip(",;"), line))
                tokens.append(Token(".", line))
            elif word.startswith(("'", '"')) and word.endswith("."):
                tokens.append(Token(word[:-1], line))
                tokens.append(Token(".", line))
            else:
                tokens.append(Token(word, line))
    return [t for t in tokens if t.text]


def _words(text, source, marks):
    """``(position, word)`` of each blank-separated word; a literal is one word however
    many blanks it holds; separator commas and semicolons are dropped."""
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start = i
        if text[i] in "'\"":
            m = _LITERAL.match(text, i)
            if m is None:
                line = max(num for pos, num in marks if pos <= start)
                raise LayoutError(f"{source.where(line)}: a literal opened with {text[i]} is never closed")
            i = m.end()
            if i < n and text[i] == ".":
                i += 1
        else:
            while i < n and not text[i].isspace():
                i += 1
        word = text[start:i]
        if word in (",", ";"):
            continue
        if word[-1] in ",;" and len(word) > 1:
            word = word[:-1]
        yield start, word
