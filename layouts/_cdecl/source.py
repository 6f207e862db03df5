"""Read C declarations and preprocess them, keeping where every line came from."""

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

from .._errors import LayoutError


def read_source(source):
    """``(text, filename)`` of a path or of declarations given as text."""
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and source.strip() and "\n" not in source and not re.search(r"[;{}]", source)
    ):
        return _read_header(Path(source)), str(Path(source))
    if not isinstance(source, str):
        raise LayoutError(f"source must be C declarations (str) or a file path, got {type(source).__name__}")
    if not source.strip():
        raise LayoutError(
            f"the source is empty ({source!r}): pass C declarations as text "
            f"('struct s {{ int x; }};') or the path of a header file"
        )
    return source, "<string>"


def _read_header(path):
    """The text of a header file; a FIFO or a device is refused before it is opened, and a
    data file given by mistake after its first 64 KiB (not read whole)."""
    from .compiler import check_text
    from .files import open_regular

    try:
        f = open_regular(
            path,
            "a C header (or, for layouts inspect and Layout.from_dwarf, an ELF object) is read "
            "from a regular file: save the declarations to a file and pass its path, or pass "
            "them as text",
        )
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in the path
        raise LayoutError(
            f"no such header file: {str(path)!r}; pass C declarations as text or the path of a file that exists"
        ) from None
    except OSError as err:
        raise LayoutError(f"cannot read the header {str(path)!r}: {err.strerror or err}") from None
    with f:
        try:
            head = f.read(1 << 16)
            check_text(head, str(path))
            data = head + f.read()
        except OSError as err:
            raise LayoutError(f"cannot read the header {str(path)!r}: {err.strerror or err}") from None
    with io.TextIOWrapper(io.BytesIO(data), errors="replace") as text:  # as Path.read_text decodes
        return text.read()


class Preprocessed:
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


def preprocess(text, filename, preprocessor, include_dirs, defines):
    cpp = None if preprocessor is False else _find_cpp(preprocessor)
    if cpp is None and preprocessor is True:
        raise LayoutError("preprocessor=True but no C preprocessor (cpp, gcc, cc, clang) is on PATH")
    if cpp is None:
        return _mini_preprocess(text, filename, defines)
    main = filename
    args = [*cpp, "-x", "c", "-std=gnu11"]
    args += [f"-I{d}" for d in include_dirs]
    args += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defines.items()]
    # a file whose size says 0 but that has text (/proc/...): cpp, which believes the
    # size, would read it as empty; it gets the text read instead
    piped = filename == "<string>" or (bool(text) and _size(filename) == 0)
    if filename == "<string>":
        args += ["-I", os.getcwd(), "-"]
    else:
        args += ["-iquote", str(Path(filename).parent), "-I", str(Path(filename).parent), "-" if piped else filename]
    from . import compiler

    try:
        run = compiler.run_limited(args, input=text if piped else None)
    except subprocess.TimeoutExpired as err:
        raise LayoutError(
            compiler.timed_out(
                f"the C preprocessor ({cpp[0]})", filename, err, "Simplify the declarations", (text, filename, args)
            )
        ) from None
    except OSError as err:
        raise LayoutError(f"could not run the C preprocessor {cpp[0]}: {err}") from None
    if run.returncode != 0:
        first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr.strip())
        raise LayoutError(f"the C preprocessor failed: {first.replace('<stdin>', '<string>')}")
    lines, origin = [], []
    file, line = main, 1
    shown = os.fsencode(filename).decode("utf-8", "replace")  # as the output is decoded
    marker = re.compile(r'#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
    for raw in run.stdout.split("\n"):
        m = marker.match(raw)
        if m:
            line, file = int(m.group(1)), _unquote(m.group(2))
            file = main if file in ("<stdin>", filename, shown) else file
            lines.append("")
            origin.append((file, line))
            continue
        lines.append(raw)
        origin.append((file, line))
        line += 1
    return Preprocessed("\n".join(lines), origin, main)


def _size(path):
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):  # gone since it was read: preprocess the text read
        return 0


def _unquote(name):
    """A file name of a line marker, as cpp quotes it (``\\``, ``\"``, ``\n``, octal)."""
    return re.sub(
        r"\\([0-7]{1,3}|.)",
        lambda m: chr(int(m.group(1), 8)) if m.group(1)[0] in "01234567" else "\n" if m.group(1) == "n" else m.group(1),
        name,
    )


def _mini_preprocess(text, filename, defines):
    """Comments, object-like #define constants and #pragma; anything else needs cpp."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    macros = {k: "1" if v is None else str(v) for k, v in defines.items()}
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("#"):
            out.append(expand(line, macros))
            continue
        m = re.match(r"#\s*(\w+)\s*(.*)", stripped)
        directive = m.group(1) if m else ""
        if directive == "define" and re.match(r"[A-Za-z_]\w*(\s|$)", m.group(2)):
            key, _, value = m.group(2).partition(" ")
            macros[key] = expand(value.strip(), macros) or "1"
            out.append("")
        elif directive == "pragma":
            out.append(line)
        else:
            raise LayoutError(
                f"{filename}:{number}: {stripped.split()[0]} needs a C preprocessor, and none "
                f"(cpp, gcc, cc, clang) is on PATH; install one (e.g. the cpp or gcc package) or "
                f"pass the declarations with the directives already expanded"
            )
    return Preprocessed("\n".join(out), [(filename, i + 1) for i in range(len(out))], filename)


def expand(line, macros):
    if not macros:
        return line
    for _ in range(16):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: macros.get(m.group(), m.group()), line)
        if new == line:
            break
        if len(new) > 1 << 20:
            raise LayoutError(
                f"a #define expands to more than 1 MiB of text ({line[:60]!r}...); check for "
                f"macros that expand into each other"
            )
        line = new
    return line
