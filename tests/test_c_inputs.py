"""Headers and objects that are not what they seem, for Layout.from_c, Layout.from_dwarf
and ``layouts inspect``: FIFOs, devices, directories and sockets (refused at once, before
any open that could block), big objects (read by sections, never whole), objects that
shrink while they are read (an error, never a crash) and running out of memory (a
message about memory and the object). Whatever could hang or crash runs in a child
process with a time limit, so that a hang fails the test in seconds."""

import json
import os
import re
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cprobe import CC

import layouts as lo

needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
ROOT = Path(__file__).resolve().parents[1]
TICK_C = "struct tick { char c; long long l; int q; };\nstruct tick t;\nchar pad[8] = {1};\n"


def child(code, timeout=30):
    """Run ``code`` in a fresh interpreter that imports this tree's layouts; a hang past
    ``timeout`` seconds raises subprocess.TimeoutExpired (and kills it)."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": path},
    )


def messages(paths):
    """Code printing, as JSON, the LayoutError of each entry point for each path."""
    return f"""
        import json
        import layouts as lo
        from layouts._cdecl import dwarf_record_names, record_names

        calls = {{"from_c": lambda p: lo.Layout.from_c(p), "built-in": lambda p: lo.Layout.from_c(p, compiler=None),
                 "record_names": record_names, "from_dwarf": lambda p: lo.Layout.from_dwarf(p),
                 "dwarf_record_names": dwarf_record_names}}
        out = {{}}
        for path in {[str(p) for p in paths]!r}:
            for name, call in calls.items():
                try:
                    call(path)
                    out[path + " " + name] = "no error"
                except lo.LayoutError as err:
                    out[path + " " + name] = str(err)
        print(json.dumps(out))
        """


HEADER_FIX = (
    r"a C header \(or, for layouts inspect and Layout.from_dwarf, an ELF object\) is read from a regular "
    r"file: save the declarations to a file and pass its path, or pass them as text"
)
OBJECT_FIX = (
    r"from_dwarf and layouts inspect read an ELF object, executable or shared library built with -g "
    r"\(prog.o, prog, lib.so\): pass the path of that file"
)


def _special_files(tmp_path):
    """``{path: what the error calls it}``: a FIFO named like a header and one like an
    object, a directory, a socket, /dev/zero and a block device where there are."""
    files = {
        tmp_path / "decls.h": "a FIFO \\(named pipe\\)",
        tmp_path / "prog.o": "a FIFO \\(named pipe\\)",
        tmp_path / "dir.h": "a directory",
    }
    os.mkfifo(tmp_path / "decls.h")
    os.mkfifo(tmp_path / "prog.o")
    os.mkdir(tmp_path / "dir.h")
    if hasattr(socket, "AF_UNIX"):
        files[tmp_path / "s.sock"] = "a socket"
    if os.path.exists("/dev/zero"):
        files[Path("/dev/zero")] = "a character device"
    block = (
        next((p for p in Path("/dev").glob("*") if not p.is_symlink() and stat.S_ISBLK(p.lstat().st_mode)), None)
        if os.path.isdir("/dev")
        else None
    )
    if block is not None:
        files[block] = "a block device"
    return files


@needs_fifo
def test_special_files_are_refused_at_once_as_headers_and_as_objects(tmp_path):
    files = _special_files(tmp_path)
    server = None
    if tmp_path / "s.sock" in files:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(tmp_path / "s.sock"))
    try:
        run = child(messages(files))
    finally:
        if server is not None:
            server.close()
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out) == 5 * len(files)
    for path, kind in files.items():
        for call in ("from_c", "built-in", "record_names"):
            assert re.fullmatch(
                rf"'{re.escape(str(path))}' is {kind}, not a regular file; {HEADER_FIX}", out[f"{path} {call}"]
            ), out[f"{path} {call}"]
        for call in ("from_dwarf", "dwarf_record_names"):
            assert re.fullmatch(
                rf"'{re.escape(str(path))}' is {kind}, not a regular file; {OBJECT_FIX}", out[f"{path} {call}"]
            ), out[f"{path} {call}"]


@needs_fifo
@pytest.mark.slow
def test_inspect_of_a_fifo_or_a_device_is_one_line_and_immediate(tmp_path):
    fifo = tmp_path / "prog.o"
    os.mkfifo(fifo)
    cases = [(fifo, []), (fifo, ["struct tick", "--compiler", "none"])]
    cases += [(Path("/dev/zero"), [])] if os.path.exists("/dev/zero") else []
    for source, extra in cases:
        run = subprocess.run(
            [sys.executable, "-m", "layouts", "inspect", str(source), *extra],
            capture_output=True,
            text=True,
            timeout=30,
        )
        kind = "a FIFO (named pipe)" if source == fifo else "a character device"
        assert run.returncode == 1 and run.stdout == ""
        assert run.stderr.startswith(
            f"layouts inspect: error: '{source}' is {kind}, not a regular file; a C "
            f"header (or, for layouts inspect and Layout.from_dwarf, an ELF object)"
        )
        assert len(run.stderr.splitlines()) == 1


@needs_fifo
def test_a_path_replaced_by_a_fifo_after_its_stat_is_refused_without_blocking(tmp_path):
    regular = tmp_path / "tick.h"
    regular.write_text(TICK_C)
    fifo = tmp_path / "swapped.o"
    os.mkfifo(fifo)
    run = child(f"""
        import os
        import layouts as lo

        real, regular = os.stat, os.stat({str(regular)!r})
        os.stat = lambda p, *a, **k: regular if os.fspath(p) == {str(fifo)!r} else real(p, *a, **k)
        for call in (lo.Layout.from_dwarf, lo.Layout.from_c):
            try:
                call({str(fifo)!r})
            except lo.LayoutError as err:
                print(err)
        """)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"'{fifo}' is a FIFO (named pipe), not a regular file; from_dwarf and layouts inspect")
    assert lines[1].startswith(f"'{fifo}' is a FIFO (named pipe), not a regular file; a C header")


# ------------------------------------------------------------------ big and changing objects


def _object(tmp_path, name="tick.o"):
    (tmp_path / "tick.c").write_text(TICK_C)
    subprocess.run([CC, "-g", "-c", "-o", str(tmp_path / name), str(tmp_path / "tick.c")], check=True)
    return tmp_path / name


def _sections(path):
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        return elf, {s.name: (i, s["sh_size"]) for i, s in enumerate(elf.iter_sections())}


def _grow(path, section, size):
    """Point ``section`` of an ELF64 object at ``size`` bytes of zeros appended to the file:
    a sparse hole, made at once whatever its size."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        if elf.elfclass != 64:
            pytest.skip("the test edits ELF64 section headers")
        order = "little" if elf.little_endian else "big"
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == section)
        entry = elf["e_shoff"] + index * elf["e_shentsize"]
    start = (path.stat().st_size + 4095) // 4096 * 4096
    with open(path, "r+b") as f:
        f.seek(entry + 24)  # Elf64_Shdr: sh_offset, then sh_size
        f.write(start.to_bytes(8, order) + size.to_bytes(8, order))
        f.truncate(start + size)
    return path


@needs_cc
def test_a_big_object_is_read_by_sections_not_whole(tmp_path):
    small = _object(tmp_path, "small.o")
    big = _grow(_object(tmp_path, "big.o"), ".data", 256 << 20)  # 256 MiB of data, about 1 KiB of DWARF
    debug = sum(
        size for name, (_, size) in _sections(big)[1].items() if name.startswith(".debug") or name == ".eh_frame"
    )
    assert big.stat().st_size > 256 << 20 and debug < 1 << 16
    run = child(f"""
        import json
        import resource
        import layouts as lo
        from layouts._cdecl import dwarf_record_names

        lo.Layout.from_dwarf({str(small)!r}, "struct tick")  # every module loaded
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        layout = lo.Layout.from_dwarf({str(big)!r}, "struct tick")
        names = dwarf_record_names({str(big)!r})
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps([layout.itemsize, names, (after - before) * 1024]))  # ru_maxrss: KiB on Linux
        """)
    assert run.returncode == 0, run.stderr
    itemsize, names, growth = json.loads(run.stdout)
    assert itemsize == 24 and "struct tick" in names
    # before: the whole file was read, twice (a 2 GB object reached 4.2 GB of peak RSS)
    assert growth < 4 * debug + (24 << 20), f"peak RSS grew by {growth / 2**20:.1f} MiB"


@needs_cc
def test_an_object_that_shrinks_while_it_is_read_is_an_error_not_a_crash(tmp_path):
    obj = _object(tmp_path)
    size = obj.stat().st_size
    run = child(f"""
        import os
        from elftools.elf.elffile import ELFFile
        import layouts as lo

        dwarf = ELFFile.get_dwarf_info

        def shrink_first(self, *args, **kwargs):  # the sections are known; their bytes are not read yet
            os.truncate({str(obj)!r}, 256)
            return dwarf(self, *args, **kwargs)

        ELFFile.get_dwarf_info = shrink_first
        try:
            lo.Layout.from_dwarf({str(obj)!r}, "struct tick")
        except lo.LayoutError as err:
            print(err)
        """)
    assert run.returncode == 0, f"status {run.returncode}: {run.stderr}"  # -7 would be SIGBUS
    assert run.stdout == (
        f"{obj} changed while it was being read ({size:,} bytes, now 256); read it once whatever "
        f"writes it has finished\n"
    )


@needs_cc
def test_a_debug_section_past_the_end_of_the_file_is_named(tmp_path):
    obj = _object(tmp_path)
    _, sections = _sections(obj)
    grown = _grow(obj, ".debug_info", 1 << 20)
    os.truncate(grown, grown.stat().st_size - 4096)
    with pytest.raises(
        lo.LayoutError,
        match=r"tick.o: section .debug_info runs past the end of the file "
        r"\(1,048,576 bytes at offset [\d,]+; the file has [\d,]+\): the file is "
        r"truncated or damaged; build or copy it again",
    ):
        lo.Layout.from_dwarf(grown, "struct tick")
    assert sections[".debug_info"][1] < 1 << 20


@needs_cc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc as on Linux")
def test_running_out_of_memory_names_memory_and_the_object(tmp_path):
    obj = _grow(_object(tmp_path), ".debug_str", 512 << 20)
    run = child(f"""
        import resource
        import layouts as lo

        lo.Layout.from_dwarf({str(_object(tmp_path, "small.o"))!r}, "struct tick")
        vm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
        try:
            lo.Layout.from_dwarf({str(obj)!r}, "struct tick")
        except lo.LayoutError as err:
            print(err)
        """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(
        f"{obj}: out of memory while reading its DWARF debug information (512.0 MiB of "
        f"DWARF sections, held in memory about twice while they are indexed); run "
        f"with more memory (or a higher memory limit)"
    )
    assert "C declarations" not in run.stdout and "compiler=None" not in run.stdout


@needs_cc
def test_a_memory_error_anywhere_in_the_dwarf_reader_says_memory(tmp_path, monkeypatch):
    from layouts._cdecl import dwarf

    obj = _object(tmp_path)

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(dwarf.Debug, "find", exhausted)
    with pytest.raises(
        lo.LayoutError,
        match=r"tick.o: out of memory while reading its DWARF debug information; run "
        r"with more memory \(or a higher memory limit\)$",
    ):
        lo.Layout.from_dwarf(obj, "struct tick")
    monkeypatch.setattr(dwarf.Debug, "named", exhausted)
    with pytest.raises(lo.LayoutError, match=r"tick.o: out of memory while reading its DWARF"):
        from layouts._cdecl import dwarf_record_names

        dwarf_record_names(obj)
