"""Compile C declarations with the machine's C compiler, for :mod:`.dwarf` to read.

The compiler is the authority on layout: whatever gcc or clang accepts is laid out as it
lays it out. The declarations are compiled once with debug information
(``-g -fno-eliminate-unused-debug-types``) into an object file whose DWARF describes every
type; a second, tiny compile asks ``_Alignof`` of the record looked up (DWARF gives an
alignment only where one was written). Both run with a time limit, in the caller's current
folder (the files they write are in a temporary one, named by absolute paths), so that a
relative path in ``$CC`` or ``compiler=`` (``./cc/wrap.sh``, ``gcc -Iinc -include
cfg.h``) means what it means in the shell it was typed in.
"""

import functools
import hashlib
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
    """A C compiler found on this machine: its command, whether it is GCC, and who named it
    (``"CC='gcc -m32'"``, ``"compiler='clang'"``; None when found on PATH by ``"auto"``)."""

    def __init__(self, path, flags=(), origin=None):
        self.path, self.flags = path, tuple(flags)  # flags: a target/ABI, e.g. --target=..., -m32
        self.origin = origin
        self.is_clang = _is_clang(path, self.flags)
        self.is_gcc = not self.is_clang

    def __repr__(self):
        return f"Compiler({self.path!r}, {self.flags!r})"

    @property
    def label(self):
        """The compiler for messages: its command and who named it."""
        command = _shown([self.path, *self.flags])
        return f"{command} (named by {self.origin})" if self.origin else command

    @property
    def fix(self):
        """How to get past a compiler that does not work, where it came from."""
        if self.origin and self.origin.startswith("CC="):
            return (
                "fix or install it, or unset CC (layouts then uses gcc, cc or clang from PATH), or pass "
                "compiler=None (layouts inspect --compiler none) for the built-in pycparser/cffi path"
            )
        if self.origin:
            return (
                "fix or install it, or pass another compiler=..., or compiler=None (layouts inspect --compiler "
                "none) for the built-in pycparser/cffi path"
            )
        return "fix or reinstall it, or pass compiler=None (layouts inspect --compiler none) for the built-in path"


#: Seconds ``CC --version`` may take (asked only of a compiler whose name does not say gcc
#: or clang): a compiler that does not answer that is broken, and says so at once.
PROBE_LIMIT = 10.0


@functools.lru_cache(maxsize=16)
def _is_clang(path, flags=()):
    name = Path(path).name
    if "clang" in name or "gcc" in name:
        return "clang" in name
    args = [path, *flags, "--version"]  # "cc", "c99", a wrapper ("ccache gcc"): ask it
    try:
        version = run_limited(args, limit=min(PROBE_LIMIT, TIME_LIMIT)).stdout
    except subprocess.TimeoutExpired:
        raise LayoutError(
            f"the C compiler {_shown(args[:-1])} did not answer `{_shown(args)}` in "
            f"{min(PROBE_LIMIT, TIME_LIMIT):g} s and was stopped (with what it started); it would hang on "
            f"the declarations too: fix it, or name another compiler (CC=..., compiler=...), or pass "
            f"compiler=None for the built-in pycparser/cffi path"
        ) from None
    except OSError:
        version = ""
    return "clang" in version.lower()


def _shown(args, limit=400):
    """A command line for a message, at most about ``limit`` characters (a CC with
    thousands of options would make the message megabytes long)."""
    return _clip(shlex.join([str(a) for a in args]), limit)


def _clip(text, limit=400):
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]} ...[{len(text) - limit:,} characters]... {text[-limit // 2 :]}"


def find_compiler(compiler):
    """The :class:`Compiler` ``compiler`` asks for, or None for the fallback.

    ``"auto"``: ``$CC`` when set (which must then work: a ``$CC`` that is not installed
    is an error, never a quiet fall back to another compiler, whose layout may differ),
    else gcc, cc or clang on PATH, else None. None/False: None. True: as "auto" but one
    must exist. Any other string: a program name or path that must exist, optionally
    followed by target/ABI options (``"clang --target=armv7-linux-gnueabihf"``,
    ``"gcc -m32"``) or after a wrapper (``"ccache gcc"``); ``$CC`` may carry options and
    wrappers the same way (split as the shell splits words).
    """
    if compiler is None or compiler is False:
        return None
    if compiler not in ("auto", True) and not isinstance(compiler, (str, os.PathLike)):
        raise LayoutError(
            f"compiler must be 'auto', None, False, True or the name/path of a C compiler, got {compiler!r}"
        )
    if compiler in ("auto", True):
        cc = os.environ.get("CC", "")
        if cc:  # set: it must name a compiler ("" is unset; "  " names none, and is an error)
            return _named(cc.strip(), f"CC={_clip(cc)!r}")
        for name in ("gcc", "cc", "clang"):
            found = _command_line(name)
            if found:
                return Compiler(*found)
        if compiler is True:
            raise LayoutError(
                "compiler=True but no C compiler ($CC, gcc, cc, clang) is on PATH; install gcc "
                "or clang, or pass compiler=None to use the built-in pycparser/cffi path"
            )
        return None
    text = os.fspath(compiler)
    return _named(text, f"compiler={_clip(text)!r}")


def _named(text, origin):
    """The Compiler a user named (``$CC`` or ``compiler=``); a LayoutError saying what was
    looked for, where, and what to do when it is not there."""
    try:
        found = _command_line(text)
    except ValueError as err:
        raise LayoutError(
            f"{origin}: cannot split it into a program and its options ({err}); quote it as a shell "
            f'would (CC="gcc -m32")'
        ) from None
    if found:
        return Compiler(*found, origin=origin)
    words = shlex.split(text)
    if not words:
        unset = ", or unset CC (layouts then uses gcc, cc or clang from PATH)" if origin.startswith("CC=") else ""
        raise LayoutError(
            f"{origin} names no program; name a C compiler (gcc, clang, a path){unset} or pass compiler=None"
        )
    program = words[0]
    if os.path.dirname(program):
        looked = (
            "exists but is not an executable file"
            if os.path.isfile(program) and not os.path.isdir(program)
            else "is a directory"
            if os.path.isdir(program)
            else "does not exist"
        )
        looked = f"{_clip(program)!r} {looked}"
    else:
        path = os.environ.get("PATH", os.defpath)
        shown = path if len(path) <= 300 else path[:300] + "..."
        looked = f"{_clip(program)!r} was looked for on PATH ({shown}) and not found"
    if origin.startswith("CC="):
        fix = (
            "install it, or unset CC (layouts then uses gcc, cc or clang from PATH), or pass compiler=None "
            "(layouts inspect --compiler none) for the built-in pycparser/cffi path; both of the latter lay "
            "records out for this machine, not for that compiler's target"
        )
    else:
        fix = (
            "install it, or pass the name or path of an installed gcc or clang, 'auto' to search PATH, or "
            "None for the built-in pycparser/cffi path"
        )
    raise LayoutError(f"{origin} names a C compiler that is not installed: {looked}; {fix}")


def _command_line(text):
    """``(path, flags)`` of a compiler named alone or with options, or None. ValueError:
    text the shell could not split (an unclosed quote)."""
    found = shutil.which(text)
    if found:
        return os.path.abspath(found), ()
    words = shlex.split(text)
    found = shutil.which(words[0]) if words else None
    return (os.path.abspath(found), tuple(words[1:])) if found else None


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
            f"data file? Pass the C header (or the declarations as text) as the source"
        )


def run_limited(args, cwd=None, input=None, limit=None):
    """Run a program with the time limit (``limit`` seconds, else :data:`TIME_LIMIT`) in
    its own process group; on timeout the whole group is killed (gcc's cc1 and cpp too,
    which a plain ``subprocess.run(timeout=)`` would wait for), and so is whatever the
    program left running when it exited. Its output goes to temporary files, not pipes:
    a background child that keeps them open does not hold the caller until the limit.
    Raises OSError or subprocess.TimeoutExpired, whose ``special`` lists the FIFOs and
    devices the group had open when it was stopped (a ``#include`` of one blocks or never
    ends)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as given:
        if input is not None:
            given.write(input.encode("utf-8", "surrogateescape"))
            given.seek(0)
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdin=given if input is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env={**os.environ, "LC_ALL": "C", "LANG": "C"},
            start_new_session=True,
        )
        try:
            proc.wait(timeout=TIME_LIMIT if limit is None else limit)
        except BaseException as error:
            if isinstance(error, subprocess.TimeoutExpired):
                error.special = _special_files_open(proc.pid)
            _kill_group(proc.pid)
            proc.wait()
            raise
        _kill_group(proc.pid)  # what it left running in the background
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            args, proc.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
        )


def _kill_group(group):
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass


def _special_files_open(group):
    """``[(path, kind)]`` of the FIFOs and devices the processes of a process group hold
    open beyond their standard streams (read from /proc on Linux; elsewhere none)."""
    from .files import kind_of

    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            if os.getpgid(int(pid)) != group:
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            if int(fd) <= 2:
                continue
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                kind = kind_of(os.stat(f"/proc/{pid}/fd/{fd}").st_mode)  # stat, never open
            except OSError:
                continue
            if (
                kind
                and kind not in ("a directory", "a socket")
                and target.startswith("/")
                and (target, kind) not in found
                and target != "/dev/null"
            ):
                found.append((target, kind))
    return found


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def special_include(text, filename, args):
    """``(path, kind)`` of the first ``#include`` that resolves to a FIFO or a device,
    following the headers' includes as the preprocessor searches (the including file's
    folder for ``"..."``, then the ``-I`` folders of ``args``, then the system's); None
    when there is none. Only ``stat`` is called on what is found: nothing blocks. A
    reading of the text, not of the preprocessor (an ``#include`` of a macro, or inside
    ``#if 0``, is not followed): what it finds explains a hang, it decides nothing."""
    from .files import kind_of, open_regular

    dirs = [
        args[i + 1] if a == "-I" else a[2:]
        for i, a in enumerate(args)
        if a.startswith("-I") and (a != "-I" or i + 1 < len(args))
    ]
    dirs += ["/usr/local/include", "/usr/include"]
    base = os.getcwd() if filename == "<string>" else os.path.dirname(os.path.abspath(filename))
    todo, seen = [(text, base)], set()
    while todo and len(seen) < 256:
        source, here = todo.pop()
        for quote, name in _INCLUDE.findall(source):
            folders = ([here] if quote == '"' else []) + dirs
            for folder in [""] if os.path.isabs(name) else folders:
                path = os.path.join(folder, name)
                try:
                    kind = kind_of(os.stat(path).st_mode)
                except (OSError, ValueError):
                    continue
                if kind is not None and kind != "a directory":
                    return path, kind
                if kind is None and path not in seen:
                    seen.add(path)
                    try:
                        with open_regular(path, "") as f:
                            todo.append((f.read(1 << 20).decode("utf-8", "replace"), os.path.dirname(path)))
                    except (OSError, LayoutError):
                        pass
                break
    return None


def timed_out(tool, what, err, fix, includes=None):
    """The message of a compiler or preprocessor stopped at the time limit: the special
    file it was reading where there is one (open, or ``#include``d: ``includes`` is
    ``(text, filename, args)``), else the likely causes, never a guess as fact."""
    special = getattr(err, "special", None)
    if not special and includes is not None:
        found = special_include(*includes)
        special = [found] if found else None
    head = f"{tool} did not finish in {TIME_LIMIT:g} s on {what} and was stopped"
    if special:
        path, kind = special[0]
        return (
            f"{head}: it was reading {path!r}, which is {kind}, not a header file (a FIFO waits for a writer, "
            f"a device such as /dev/zero never ends); #include only regular files"
        )
    return (
        f"{head} (ran for more than {TIME_LIMIT:g} s); a huge header, a macro that expands without end, or a "
        f"compiler that hangs? {fix}"
    )


def _command(cc, args, cwd, what, text=None):
    try:
        return run_limited(args, cwd)
    except subprocess.TimeoutExpired as err:
        raise LayoutError(
            timed_out(
                f"the C compiler ({cc.path})",
                what,
                err,
                "Simplify the declarations, or pass compiler=None for the built-in path",
                None if text is None else (text, what, args),
            )
        ) from None
    except OSError as err:
        raise LayoutError(f"could not run the C compiler {cc.label}: {err.strerror or err}; {cc.fix}") from None


def _failed(cc, run, main, filename, tmp):
    """The LayoutError of a compile that failed: the declarations' first C error, or, when
    the compiler printed none and cannot compile an empty file either, the compiler itself."""
    if run.returncode < 0:
        return LayoutError(
            f"the C compiler {cc.label} was killed by {_signal(run.returncode)} while compiling "
            f"{filename} (out of memory, a crash, or killed from outside); {cc.fix}"
        )
    if not _DIAG.search(run.stderr):
        broken = _broken(cc, tmp)
        if broken:
            return LayoutError(broken)
    return LayoutError(_diagnostic(run.stderr, main, filename, tmp, cc))


def _broken(cc, tmp):
    """Why the compiler cannot compile an empty C file, or None when it can."""
    probe = Path(tmp) / "layouts_probe.c"
    probe.write_text("int layouts_probe;\n")
    out = Path(tmp) / "layouts_probe.o"
    args = [cc.path, *cc.flags, "-x", "c", "-c", "-o", str(out), str(probe)]
    try:
        run = run_limited(args)
    except subprocess.TimeoutExpired:
        return (
            f"the C compiler {cc.label} does not work: it ran for more than {TIME_LIMIT:g} s on an empty file "
            f"and was stopped; {cc.fix}"
        )
    except OSError as err:
        return f"could not run the C compiler {cc.label}: {err.strerror or err}; {cc.fix}"
    if run.returncode == 0 and _elf_object(out):
        return None
    said = next((ln.strip() for ln in run.stderr.splitlines() if ln.strip()), "")
    result = (
        f"was killed by {_signal(run.returncode)}"
        if run.returncode < 0
        else f"exited with status {run.returncode}"
        if run.returncode
        else "wrote no ELF object file"
    )
    return (
        f"the C compiler {cc.label} does not work: `{_shown(args[:-2] + ['x.o', 'empty.c'])}` "
        f"{result}{': ' + said[:200] if said else ' and printed nothing'}; {cc.fix}"
    )


def _signal(returncode):
    try:
        return f"signal {signal.Signals(-returncode).name} ({-returncode})"
    except ValueError:
        return f"signal {-returncode}"


def _elf_object(path):
    """Whether the compiler wrote an ELF file at ``path``; never blocks: anything but a
    regular file (a FIFO, a link to a device) is refused before it is opened."""
    from .files import is_elf

    return is_elf(path)


def _read_object(cc, obj):
    from .files import open_regular

    try:
        with open_regular(
            obj, f"the C compiler {cc.label} must write its object file as a regular file; {cc.fix}"
        ) as f:
            return f.read()
    except LayoutError as err:
        raise LayoutError(f"the C compiler's output {err}") from None
    except OSError as err:
        raise LayoutError(
            f"cannot read the object file the C compiler {cc.label} wrote: {err.strerror or err}; {cc.fix}"
        ) from None


def _object(cc, obj, filename, tmp):
    """The object file a compile that exited 0 wrote: its bytes, checked to be ELF."""
    from .files import open_regular

    try:
        open_regular(obj, "").close()
    except LayoutError:
        return _read_object(cc, obj)  # its message: what the compiler wrote instead of a file
    except OSError:
        pass
    if not _elf_object(obj):
        broken = _broken(cc, tmp)
        if broken:
            raise LayoutError(broken)
        raise LayoutError(
            f"the C compiler {cc.label} exited with status 0 on {filename} but wrote no ELF object "
            f"file; layouts reads the DWARF of ELF objects (gcc or clang targeting Linux or a BSD); "
            f"{cc.fix}"
        )
    return _read_object(cc, obj)


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
        unit.write_text("\n")  # the declarations come in by -include: a path needs no quoting there
        obj = Path(tmp) / "layouts_unit.o"
        args = _args(cc, filename, include_dirs, defines, pack, sso) + ["-include", main]
        args += ["-c", "-g", "-fno-eliminate-unused-debug-types", "-o", str(obj), str(unit)]
        if cc.is_gcc:  # names inline, not in .debug_str: no relocation per name for the reader
            args.insert(-4, "-fno-merge-debug-strings")
        run = _command(cc, args, None, filename, text)
        if run.returncode != 0:
            raise _failed(cc, run, main, filename, tmp)
        return Compiled(_object(cc, obj, filename, tmp), os.path.abspath(main), filename, tmp)


def fingerprint(cc, text, filename, include_dirs, defines, pack, sso):
    """A digest of the declarations as the compiler's preprocessor sees them: the text of
    every header they include (wherever ``-I``, the current folder or the compiler's own
    search finds it), the macros and the options. Two sources with one fingerprint lay out
    alike, so the compile cache is keyed on it, never on the main file's text alone (an
    edited ``#include``d header, or a ``#include "sub.h"`` that resolves against another
    current folder, must be compiled again). None where the preprocessor failed (the
    compile then runs, uncached, and reports the error)."""
    with tempfile.TemporaryDirectory(prefix="layouts-cc-") as tmp:
        main = _place(text, filename, tmp)
        unit = Path(tmp) / "layouts_unit.c"
        unit.write_text("\n")
        args = _args(cc, filename, include_dirs, defines, pack, sso) + ["-include", main, "-E", str(unit)]
        run = _command(cc, args, None, filename, text)
        if run.returncode != 0:
            return None
        digest = hashlib.sha256(run.stdout.replace(tmp, "").encode("utf-8", "surrogateescape"))
        digest.update(repr(args[1:]).replace(tmp, "").encode("utf-8", "surrogateescape"))
        return digest.hexdigest()


def alignments(cc, text, filename, include_dirs, defines, pack, sso, spellings):
    """``_Alignof`` of each C type spelling (``"struct tick"``, ``"tick_t"``), as the
    compiler says (one compile, read back from the sizes of probe arrays)."""
    with tempfile.TemporaryDirectory(prefix="layouts-cc-") as tmp:
        main = _place(text, filename, tmp)
        probes = "".join(f"char __layouts_align_{i}[_Alignof({s})];\n" for i, s in enumerate(spellings))
        unit = Path(tmp) / "layouts_align.c"
        unit.write_text(probes)
        obj = Path(tmp) / "layouts_align.o"
        args = _args(cc, filename, include_dirs, defines, pack, sso) + [
            "-include",
            main,
            "-c",
            "-fno-common",
            "-o",
            str(obj),
            str(unit),
        ]
        run = _command(cc, args, None, filename, text)
        if run.returncode != 0:
            raise _failed(cc, run, main, filename, tmp)
        return symbol_sizes(_object(cc, obj, filename, tmp), "__layouts_align_", len(spellings))


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
                sizes[int(sym.name[len(prefix) :])] = sym["st_size"]
    return [sizes.get(i) for i in range(n)]


def _place(text, filename, tmp):
    """The path the compiler reads the declarations from."""
    if filename != "<string>" and Path(filename).is_file() and (_size(filename) or not text):
        return os.path.abspath(filename)
    # text, or a file whose size says 0 and that has text (/proc/...: the compiler, which
    # believes the size, would read it as empty): the text read, from the folder
    # (the header's own, by -iquote: its #include "..." find what they found)
    main = Path(tmp) / _MAIN
    main.write_text(text)
    return str(main)


def _size(path):
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return 0


def _args(cc, filename, include_dirs, defines, pack, sso):
    """The compiler's command line; ``sso``: "big"/"little" for GCC's -fsso-struct, or None."""
    args = [
        cc.path,
        *cc.flags,
        "-x",
        "c",
        "-std=gnu11",
        "-O0",
        "-w",
        "-fmax-errors=5" if cc.is_gcc else "-ferror-limit=5",
    ]
    if pack:
        args.append(f"-fpack-struct={pack}")
    if sso and cc.is_gcc:
        args.append(f"-fsso-struct={sso}-endian")
    args += [f"-I{os.path.abspath(d)}" for d in include_dirs]
    args += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in (defines or {}).items()]
    base = os.getcwd() if filename == "<string>" else os.path.dirname(os.path.abspath(filename))
    args += ["-I", base]
    if filename != "<string>":
        args += ["-iquote", base]
    return args


_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:\s*(?P<msg>.*)$", re.M)


def _diagnostic(stderr, main, filename, tmp, cc):
    """A one-line LayoutError message from the compiler's first error."""
    m = _DIAG.search(stderr)
    tool = Path(cc.path).name
    if not m:
        first = next((ln for ln in stderr.splitlines() if ln.strip()), "(no message)")
        return f"{filename}: the C compiler ({tool}) rejected the declarations: {first.strip()[:500]}"
    file = m.group("file")
    if os.path.abspath(file) == main or file == _MAIN:
        file = filename
    elif file.startswith(tmp):
        file = filename
    where = f"{file}:{m.group('line')}" + (f":{m.group('col')}" if m.group("col") else "")
    msg = m.group("msg").strip()[:500]
    hint = "fix the declaration"
    if "No such file" in msg or "file not found" in msg:
        hint = "pass include_dirs=[...] (-I) for the folder that holds it"
    elif "incomplete type" in msg:
        hint = "define that struct/union (or #include the header that defines it) before this one"
    elif "unknown type name" in msg or "undeclared" in msg:
        hint = "declare it (typedef, #define or enum) before use, or #include its header"
    return f"{where}: C error: {msg} ({tool}); {hint}"
