"""Compile C declarations with the machine's C compiler, for :mod:`.dwarf` to read.

The compiler is the authority on layout: whatever gcc or clang accepts is laid out as it
lays it out. The declarations are compiled once with debug information
(``-g -fno-eliminate-unused-debug-types``) into an object file whose DWARF describes every
type; a second, tiny compile asks ``_Alignof`` of the record looked up (DWARF gives an
alignment only where one was written). Both run with a time limit.
"""

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from .._errors import LayoutError

#: Seconds the compiler (and the preprocessor of the fallback path) may run.
TIME_LIMIT = 30.0

_MAIN = "layouts_decls.h"  # the name declarations given as text get in the temporary folder


class Compiler:
    """A C compiler found on this machine: its command and whether it is GCC."""

    def __init__(self, path, flags=()):
        self.path, self.flags = path, tuple(flags)  # flags: a target/ABI, e.g. --target=..., -m32
        self.is_clang = _is_clang(path)
        self.is_gcc = not self.is_clang

    def __repr__(self):
        return f"Compiler({self.path!r}, {self.flags!r})"


@functools.lru_cache(maxsize=16)
def _is_clang(path):
    name = Path(path).name
    if "clang" in name or "gcc" in name:
        return "clang" in name
    try:  # "cc", "c99", a wrapper: ask it
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=TIME_LIMIT).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    return "clang" in version.lower()


def find_compiler(compiler):
    """The :class:`Compiler` ``compiler`` asks for, or None for the fallback.

    ``"auto"``: ``$CC`` when set, else gcc, cc or clang on PATH, else None.
    None/False: None. True: as "auto" but one must exist. Any other string: a program
    name or path that must exist, optionally followed by target/ABI options
    (``"clang --target=armv7-linux-gnueabihf"``, ``"gcc -m32"``); ``$CC`` may carry
    options the same way.
    """
    if compiler is None or compiler is False:
        return None
    if compiler not in ("auto", True) and not isinstance(compiler, (str, os.PathLike)):
        raise LayoutError(f"compiler must be 'auto', None, False, True or the name/path of a C compiler, "
                          f"got {compiler!r}")
    if compiler in ("auto", True):
        cc = os.environ.get("CC", "").strip()
        for name in ([cc] if cc else []) + ["gcc", "cc", "clang"]:
            found = _command_line(name)
            if found:
                return Compiler(*found)
        if compiler is True:
            raise LayoutError("compiler=True but no C compiler ($CC, gcc, cc, clang) is on PATH; install gcc "
                              "or clang, or pass compiler=None to use the built-in pycparser/cffi path")
        return None
    found = _command_line(os.fspath(compiler))
    if not found:
        raise LayoutError(f"compiler {os.fspath(compiler)!r} was not found; pass the name or path of gcc or "
                          f"clang, 'auto' to search PATH, or None for the built-in pycparser/cffi path")
    return Compiler(*found)


def _command_line(text):
    """``(path, flags)`` of a compiler named alone or with options, or None."""
    found = shutil.which(text)
    if found:
        return found, ()
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    found = shutil.which(words[0]) if words else None
    return (found, tuple(words[1:])) if found else None


def check_text(data, filename):
    """Refuse a source that is not C text (a data file given by mistake) before any
    program runs over it."""
    head = data[: 1 << 16]
    if isinstance(head, str):
        binary = "\0" in head
        odd = sum(1 for ch in head if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    else:
        binary = b"\0" in head
        odd = sum(1 for b in head if b < 32 and b not in b"\t\n\r\f\v")
    if binary or (head and odd > max(8, len(head) // 100)):
        raise LayoutError(
            f"{filename} looks like binary data, not C declarations; did you swap the header and the "
            f"data file? Pass the C header (or the declarations as text) as the source")


def run_limited(args, cwd=None, input=None):
    """Run a program with the time limit; on timeout its whole process group is killed
    (gcc's cc1 and cpp too, which a plain ``subprocess.run(timeout=)`` would wait for).
    Raises subprocess.TimeoutExpired or OSError."""
    proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            env={**os.environ, "LC_ALL": "C", "LANG": "C"}, start_new_session=True)
    try:
        out, err = proc.communicate(input, timeout=TIME_LIMIT)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _command(cc, args, cwd, what):
    try:
        return run_limited(args, cwd)
    except subprocess.TimeoutExpired:
        raise LayoutError(
            f"the C compiler ({cc.path}) ran for more than {TIME_LIMIT:g} s on {what} and was stopped; "
            f"a macro that expands without end, or a huge header? Simplify the declarations, or pass "
            f"compiler=None for the built-in path") from None
    except OSError as err:
        raise LayoutError(f"could not run the C compiler {cc.path}: {err}") from None


class Compiled:
    """An object file compiled from the declarations, and how to name its files."""

    def __init__(self, obj, main, display, tmp):
        self.obj, self.main, self.display, self.tmp = obj, main, display, tmp

    def name_of(self, path):
        """The file name users know for a path in the debug info."""
        if path is None:
            return self.display
        return self.display if os.path.abspath(path) == self.main else path


def compile_declarations(cc, text, filename, include_dirs, defines, pack, sso):
    """Compile the declarations; return a :class:`Compiled` (object bytes, file names)."""
    check_text(text, filename)
    with tempfile.TemporaryDirectory(prefix="layouts-cc-") as tmp:
        main = _place(text, filename, tmp)
        unit = Path(tmp) / "layouts_unit.c"
        unit.write_text(f'#include "{_quote(main)}"\n')
        obj = Path(tmp) / "layouts_unit.o"
        args = _args(cc, filename, include_dirs, defines, pack, sso)
        args += ["-c", "-g", "-fno-eliminate-unused-debug-types", "-o", str(obj), str(unit)]
        if cc.is_gcc:  # names inline, not in .debug_str: no relocation per name for the reader
            args.insert(-4, "-fno-merge-debug-strings")
        run = _command(cc, args, tmp, filename)
        if run.returncode != 0:
            raise LayoutError(_diagnostic(run.stderr, main, filename, tmp, cc))
        return Compiled(obj.read_bytes(), os.path.abspath(main), filename, tmp)


def alignments(cc, text, filename, include_dirs, defines, pack, sso, spellings):
    """``_Alignof`` of each C type spelling (``"struct tick"``, ``"tick_t"``), as the
    compiler says (one compile, read back from the sizes of probe arrays)."""
    with tempfile.TemporaryDirectory(prefix="layouts-cc-") as tmp:
        main = _place(text, filename, tmp)
        probes = "".join(f"char __layouts_align_{i}[_Alignof({s})];\n" for i, s in enumerate(spellings))
        unit = Path(tmp) / "layouts_align.c"
        unit.write_text(f'#include "{_quote(main)}"\n{probes}')
        obj = Path(tmp) / "layouts_align.o"
        args = _args(cc, filename, include_dirs, defines, pack, sso) + ["-c", "-fno-common", "-o", str(obj),
                                                                          str(unit)]
        run = _command(cc, args, tmp, filename)
        if run.returncode != 0:
            raise LayoutError(_diagnostic(run.stderr, main, filename, tmp, cc))
        return symbol_sizes(obj.read_bytes(), "__layouts_align_", len(spellings))


def symbol_sizes(data, prefix, n):
    import io

    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    sizes = {}
    for section in elf.iter_sections():
        if section.header.sh_type not in ("SHT_SYMTAB", "SHT_DYNSYM"):
            continue
        for sym in section.iter_symbols():
            if sym.name.startswith(prefix):
                sizes[int(sym.name[len(prefix):])] = sym["st_size"]
    return [sizes.get(i) for i in range(n)]


def _place(text, filename, tmp):
    """The path the compiler reads the declarations from."""
    if filename != "<string>" and Path(filename).is_file():
        return os.path.abspath(filename)
    main = Path(tmp) / _MAIN
    main.write_text(text)
    return str(main)


def _quote(path):
    return str(path).replace("\\", "\\\\").replace('"', '\\"')


def _args(cc, filename, include_dirs, defines, pack, sso):
    """The compiler's command line; ``sso``: "big"/"little" for GCC's -fsso-struct, or None."""
    args = [cc.path, *cc.flags, "-x", "c", "-std=gnu11", "-O0", "-w",
            "-fmax-errors=5" if cc.is_gcc else "-ferror-limit=5"]
    if pack:
        args.append(f"-fpack-struct={pack}")
    if sso and cc.is_gcc:
        args.append(f"-fsso-struct={sso}-endian")
    args += [f"-I{os.path.abspath(d)}" for d in include_dirs]
    args += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in (defines or {}).items()]
    base = os.getcwd() if filename == "<string>" else os.path.dirname(os.path.abspath(filename))
    args += ["-I", base]
    return args


_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:\s*(?P<msg>.*)$", re.M)


def _diagnostic(stderr, main, filename, tmp, cc):
    """A one-line LayoutError message from the compiler's first error."""
    m = _DIAG.search(stderr)
    tool = Path(cc.path).name
    if not m:
        first = next((ln for ln in stderr.splitlines() if ln.strip()), "(no message)")
        return f"{filename}: the C compiler ({tool}) rejected the declarations: {first.strip()}"
    file = m.group("file")
    if os.path.abspath(file) == main or file == _MAIN:
        file = filename
    elif file.startswith(tmp):
        file = filename
    where = f"{file}:{m.group('line')}" + (f":{m.group('col')}" if m.group("col") else "")
    msg = m.group("msg").strip()
    hint = "fix the declaration"
    if "No such file" in msg or "file not found" in msg:
        hint = "pass include_dirs=[...] (-I) for the folder that holds it"
    elif "incomplete type" in msg:
        hint = "define that struct/union (or #include the header that defines it) before this one"
    elif "unknown type name" in msg or "undeclared" in msg:
        hint = "declare it (typedef, #define or enum) before use, or #include its header"
    return f"{where}: C error: {msg} ({tool}); {hint}"
