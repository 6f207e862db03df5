"""Layout.from_c with the C compiler as the layout oracle (gcc/clang + DWARF), and the
built-in pycparser/cffi path beside it: both must give the same Layout for everything the
built-in path supports; what only the compiler lays out is checked against the compiler."""

import os
import re
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from cprobe import CC, compiler_facts, layout_facts, run_c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cdecl import DECLARATIONS, TICK_H

import layouts as lo
from layouts._cdecl import compiler as ccmod
from layouts._cli import main

FOUND = ccmod.find_compiler("auto")
needs_cc = pytest.mark.skipif(CC is None or FOUND is None, reason="no C compiler on this machine")
needs_gcc = pytest.mark.skipif(FOUND is None or not FOUND.is_gcc, reason="needs gcc (its messages, -fsso-struct)")

# ------------------------------------------------------------------ both paths agree

# Declarations both paths lay out: the Layouts (dtype, C types, bit-fields, enums,
# alignment, notes) must be equal.
BOTH = {
    **DECLARATIONS,
    "struct a1": "struct a1 { char c; _Alignas(16) int x; };",
    "struct a2": "struct a2 { char c; _Alignas(double) char d; char e[sizeof(int)]; int f[_Alignof(long)]; };",
    "struct io": "#include <stdio.h>\n#include <stdarg.h>\n#include <wchar.h>\n#include <math.h>\n"
    "struct io { int fd; wchar_t w; double d; char name[16]; va_list *ap; FILE *f; };",
    "struct gx": "struct gx { __int128 a; unsigned __int128 b; _Float16 h; float _Complex z; double _Complex w;"
    " _Float32 f; _Float64 d; __int128_t t; __uint128_t u; };",
    "struct zl": "struct zl { int n; char d[0]; int e; short f[0]; };",
    "struct ke": "enum { K = sizeof(double) * 2 }; enum big { HUGE = 1 + 1000000000000 };\n"
    "struct ke { char x[K]; int b : sizeof(short) * 4; enum big e; };",
    "struct pk3": "#pragma pack(3)\nstruct pk3 { char c; int a; };\n#pragma pack()\n",
    "struct pk3b": "#pragma pack(2)\n#pragma pack(3)\nstruct pk3b { char c; int x; };\n#pragma pack()\n",
    "struct ea": "enum { AL = 8 }; struct ea { char c; int x __attribute__((aligned(AL))); };",
    "struct q1": "#pragma pack(1)\nstruct q1 { char c; _Alignas(8) int x; char d; };\n#pragma pack()\n",
    "struct q2": "struct q2 { char c; _Alignas(8) int x; char d; } __attribute__((packed));",
    "struct q3": "#pragma pack(2)\nstruct q3 { char c; _Alignas(16) double x; char d; };\n#pragma pack()\n",
    "struct q4": "struct q4 { char c; _Alignas(4) _Alignas(16) short x; };",
    "struct q5": "typedef struct { char c; _Alignas(32) char x; } t5; struct q5 { char a; t5 t[2]; };",
    "struct fp": "struct fp { void (*cb)(int); int (*op)(void); long n; };",
    "utmp": "#include <utmp.h>\n",
    "Elf64_Shdr": "#include <elf.h>\n",
    "Elf64_Sym": "#include <elf.h>\n",
    "struct stat": "#include <sys/stat.h>\n",
    "struct sockaddr_in6": "#include <netinet/in.h>\n",
    "struct termios": "#include <termios.h>\n",
    "struct sigaction": "#include <signal.h>\n",
    "siginfo_t": "#include <signal.h>\n",
    "struct timeval": "#include <sys/time.h>\n",
    "struct utmpx": "#include <utmpx.h>\n",
    "fd_set": "#include <sys/select.h>\n",
    "struct sockaddr_storage": "#include <sys/socket.h>\n",
    "struct tm": "#include <time.h>\n",
    "struct iphdr": "#include <netinet/ip.h>\n",
    "struct tcphdr": "#include <netinet/tcp.h>\n",
}


@needs_cc
@pytest.mark.parametrize("byteorder", ["native", pytest.param("big", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(BOTH))
def test_compiler_and_built_in_paths_give_the_same_layout(name, byteorder):
    options = {"pointers": "int", "byteorder": byteorder}
    by_compiler = lo.Layout.from_c(BOTH[name], name, **options)
    built_in = lo.Layout.from_c(BOTH[name], name, compiler=None, **options)
    assert by_compiler.c.ctypes == built_in.c.ctypes
    assert by_compiler == built_in


@needs_cc
# (siginfo_t, struct sigaction and utmp are left out: their headers define member names as
# macros, so the probe's member expressions do not compile)
@pytest.mark.parametrize(
    "name", sorted(set(BOTH) - set(DECLARATIONS) - {"struct gx", "siginfo_t", "struct sigaction", "utmp"})
)
def test_what_both_paths_lay_out_matches_the_compiler(name):
    layout = lo.Layout.from_c(BOTH[name], name, pointers="int")
    assert compiler_facts(BOTH[name], name, layout) == layout_facts(layout)


# Records of the system headers: both paths agree, and agree with the compiler's probe
# (where the probe can name the members: some headers #define member names).
SYSTEM = {
    "struct sockaddr_in": "netinet/in.h",
    "struct sockaddr_un": "sys/un.h",
    "struct rusage": "sys/resource.h",
    "struct timespec": "time.h",
    "struct itimerval": "sys/time.h",
    "struct statvfs": "sys/statvfs.h",
    "struct dirent": "dirent.h",
    "struct flock": "fcntl.h",
    "struct ip6_hdr": "netinet/ip6.h",
    "struct udphdr": "netinet/udp.h",
    "struct icmphdr": "netinet/ip_icmp.h",
    "struct ether_header": "net/ethernet.h",
    "struct arphdr": "net/if_arp.h",
    "struct rlimit": "sys/resource.h",
    "struct winsize": "sys/ioctl.h",
    "struct pollfd": "poll.h",
    "struct epoll_event": "sys/epoll.h",
    "struct sembuf": "sys/sem.h",
    "Elf32_Ehdr": "elf.h",
    "Elf64_Ehdr": "elf.h",
    "Elf64_Phdr": "elf.h",
    "Elf64_Dyn": "elf.h",
    "Elf64_Rela": "elf.h",
    "Elf32_Sym": "elf.h",
    "struct utsname": "sys/utsname.h",
    "struct sysinfo": "sys/sysinfo.h",
    "struct tms": "sys/times.h",
    "struct in6_addr": "netinet/in.h",
    "struct ip_mreq": "netinet/in.h",
    "struct linger": "sys/socket.h",
    "struct ucred": "sys/socket.h",
    "struct lastlog": "utmp.h",
    "struct stat64": "sys/stat.h",
    "struct statx": "sys/stat.h",
    "struct input_event": "linux/input.h",
    "struct tcp_info": "netinet/tcp.h",
    "struct ifreq": "net/if.h",
    "struct mq_attr": "mqueue.h",
    "struct sched_param": "sched.h",
    "struct timex": "sys/timex.h",
    "struct ntptimeval": "sys/timex.h",
    "struct shmid_ds": "sys/shm.h",
    "struct msqid_ds": "sys/msg.h",
    "struct signalfd_siginfo": "sys/signalfd.h",
    "struct ip": "netinet/ip.h",
    "struct nlmsghdr": "linux/netlink.h",
    "struct user_regs_struct": "sys/user.h",
    "struct elf_prstatus": "sys/procfs.h",
    "struct _IO_FILE": "stdio.h",
    "mbstate_t": "wchar.h",
    "div_t": "stdlib.h",
    "struct lconv": "locale.h",
    "struct passwd": "pwd.h",
    "struct group": "grp.h",
    "struct hostent": "netdb.h",
    "struct addrinfo": "netdb.h",
    "struct msghdr": "sys/socket.h",
    "struct iovec": "sys/uio.h",
}
_NO_PROBE = {"struct utsname", "struct ucred", "struct stat64", "struct statx"}


@needs_cc
@pytest.mark.slow  # 58 system headers through gcc (13 s): the fast loop keeps the built-in cases below
@pytest.mark.parametrize("name", sorted(SYSTEM))
def test_system_records_on_both_paths_and_against_the_compiler(name):
    src = f"#define _GNU_SOURCE\n#include <{SYSTEM[name]}>\n"
    by_compiler = lo.Layout.from_c(src, name, pointers="int")
    assert lo.Layout.from_c(src, name, pointers="int", compiler=None) == by_compiler
    if name not in _NO_PROBE:
        assert compiler_facts(src, name, by_compiler) == layout_facts(by_compiler)


# ------------------------------------------------ what only the compiler lays out

ONLY_CC = {
    "struct pp": "#pragma pack(push, 2)\nstruct pp { char c; unsigned a:3; unsigned long long b:40; short s:9; };\n"
    "#pragma pack(pop)\n",
    "struct p4": "#pragma pack(4)\nstruct p4 { char c; unsigned a:3; long long b:50; char d; unsigned e:30; };\n",
    "struct ps": "struct ps { char c; unsigned a:3; unsigned b:30; } __attribute__((packed));",
    "struct pz": "struct pz { char c; unsigned a:3; int :0; char d; } __attribute__((packed));",
    "struct pab": "struct pab { char c; int x __attribute__((aligned(8))); unsigned a:3; } __attribute__((packed));",
    "struct md": "struct md { char c; int m __attribute__((mode(DI))); int q __attribute__((mode(QI))); };",
    "struct vs": "typedef int v4 __attribute__((vector_size(16)));\nstruct vs { char c; v4 v; short s; };",
    "struct i1": "struct i1 { char c; __int128 v; unsigned __int128 u; char d; };",
    "struct h1": "struct h1 { char c; _Float16 h; float f; _Float16 hs[3]; };",
}


@needs_cc
@pytest.mark.parametrize("name", sorted(ONLY_CC))
def test_constructs_only_the_compiler_lays_out_match_it(name):
    layout = lo.Layout.from_c(ONLY_CC[name], name)
    assert compiler_facts(ONLY_CC[name], name, layout) == layout_facts(layout)


@needs_cc
@pytest.mark.slow
def test_issue_cases_have_the_compilers_sizes_and_types():
    a1 = lo.Layout.from_c("struct a1 { char c; _Alignas(16) int x; };")
    assert (a1.itemsize, a1["x"].offset, a1.alignment) == (32, 16, 16)
    sz = lo.Layout.from_c("struct s { char a[sizeof(int)]; int b[sizeof(double) / 2]; };")
    assert sz.dtype["a"] == np.dtype("S4") and sz.dtype["b"].shape == (4,)
    md = lo.Layout.from_c(ONLY_CC["struct md"])
    assert (md["m"].dtype, md["q"].dtype, md.itemsize) == (np.dtype("<i8"), np.dtype("i1"), 24)
    vs = lo.Layout.from_c(ONLY_CC["struct vs"])
    assert vs["v"].offset == 16 and vs.dtype["v"].shape == (4,) and vs.alignment == 16
    h = lo.Layout.from_c(ONLY_CC["struct h1"])
    assert h.schema.field("h").type == pa.float16() and h["h"].offset == 2
    z = lo.Layout.from_c("struct z { float _Complex fc; double _Complex dc; };")
    assert z.schema.field("fc").type == pa.struct([("re", pa.float32()), ("im", pa.float32())])
    zl = lo.Layout.from_c(BOTH["struct zl"], "struct zl")
    assert zl.names == ["n", "e"] and zl.itemsize == 8
    assert zl.c.notes == (
        "field 'd' (char[0]) is a zero-length array: no bytes, no column",
        "field 'f' (short[0]) is a zero-length array: no bytes, no column",
    )
    with pytest.raises(lo.LayoutError, match=r"field 'x' is long double \(16 bytes here\): no NumPy/Arrow type"):
        lo.Layout.from_c("struct s { long double x; };")
    with pytest.raises(lo.LayoutError, match=r"field 'z' is long double _Complex \(32 bytes here\)"):
        lo.Layout.from_c("struct s { long double _Complex z; };")


@needs_cc
@pytest.mark.slow
def test_int128_keeps_the_bytes_a_c_program_wrote(tmp_path):
    src = "struct i { char c; __int128 v; unsigned __int128 u; };"
    layout = lo.Layout.from_c(src)
    assert layout.schema.field("v").type == pa.binary(16) and layout["v"].offset == 16
    assert "kept as its 16 bytes" in layout.c.notes[0]
    writer = (
        src
        + r"""
    #include <stdio.h>
    int main(int argc, char **argv) {
        FILE *f = fopen(argv[1], "wb");
        for (int k = 0; k < 5; k++) {
            struct i r = {0};
            r.c = k; r.v = ((__int128)1 << 100) * (k - 2) + 5 * k; r.u = ~(unsigned __int128)0 - k;
            fwrite(&r, sizeof r, 1, f);
        }
        fclose(f);
        return 0;
    }"""
    )
    run_c(writer, str(tmp_path / "i.bin"))
    raw = (tmp_path / "i.bin").read_bytes()
    table = lo.AoS(raw, layout).to_soa().to_arrow()
    values = [int.from_bytes(b, "little", signed=True) for b in table.column("v").to_pylist()]
    assert values == [(1 << 100) * (k - 2) + 5 * k for k in range(5)]
    assert [int.from_bytes(b, "little") for b in table.column("u").to_pylist()] == [2**128 - 1 - k for k in range(5)]
    assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == raw


_SSO = """
struct __attribute__((scalar_storage_order("big-endian"))) so {
    unsigned short a; unsigned b:3, c:13; int d; unsigned char e:4, f:4; long long g;
};
"""


@needs_gcc
@pytest.mark.parametrize("how", ["attribute", "byteorder"])
def test_big_endian_records_as_gcc_writes_them(tmp_path, how):
    """scalar_storage_order in the source, or byteorder="big" (GCC's -fsso-struct): the
    fields, bit-fields included, are where and as GCC puts them, byte for byte."""
    src = _SSO if how == "attribute" else _SSO.replace('__attribute__((scalar_storage_order("big-endian")))', "")
    writer = (
        src
        + r"""
    #include <stdio.h>
    int main(int argc, char **argv) {
        FILE *f = fopen(argv[1], "wb");
        for (int k = 0; k < 50; k++) {
            struct so r = {0};
            r.a = 1000 + k; r.b = k % 8; r.c = 17 * k; r.d = -k * 100000; r.e = k % 16; r.f = 15 - k % 16;
            r.g = -123456789012LL * k;
            fwrite(&r, sizeof r, 1, f);
            printf("%u %u %u %d %u %u %lld\n", r.a, r.b, r.c, r.d, r.e, r.f, r.g);
        }
        fclose(f);
        return 0;
    }"""
    )
    flags = () if how == "attribute" else ("-fsso-struct=big-endian",)
    printed = [
        [int(x) for x in line.split()] for line in run_c(writer, str(tmp_path / "so.bin"), flags=flags).splitlines()
    ]
    layout = lo.Layout.from_c(src, "struct so", byteorder="native" if how == "attribute" else "big")
    assert layout.dtype["a"] == np.dtype(">u2") and layout.dtype["g"] == np.dtype(">i8")
    raw = (tmp_path / "so.bin").read_bytes()
    table = lo.AoS(raw, layout).to_soa().to_arrow()
    assert [list(row.values()) for row in table.to_pylist()] == printed
    assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == raw
    assert layout.c.ctypes[:2] == (("a", "unsigned short"), ("b", "unsigned int :3"))


# --------------------------------------------------------------------------- names


@needs_cc
@pytest.mark.parametrize("compiler", ["auto", None])
def test_names_resolve_bare_tagged_typedef_and_from_included_headers(compiler):
    bare = lo.Layout.from_c("#include <utmp.h>\n", "utmp", compiler=compiler)
    tagged = lo.Layout.from_c("#include <utmp.h>\n", "struct utmp", compiler=compiler)
    assert bare == tagged and bare.c.name == "struct utmp" and bare.itemsize == 384
    shdr = lo.Layout.from_c("#include <elf.h>\n", "Elf64_Shdr", compiler=compiler)
    assert shdr.itemsize == 64 and shdr.c.name == "Elf64_Shdr"
    typedef = lo.Layout.from_c(TICK_H, "tick_t", compiler=compiler)
    assert typedef.c.name == "tick_t" and typedef == lo.Layout.from_c(TICK_H, "tick_t", compiler=compiler)
    assert lo.Layout.from_c(TICK_H, "tick", compiler=compiler).c.name == "struct tick"


@needs_cc
@pytest.mark.parametrize("compiler", ["auto", None])
@pytest.mark.parametrize(
    "src,name,message",
    [
        (
            "struct x { int a; }; typedef struct y { char b; } x;",
            "x",
            r"'x' is ambiguous: it names struct x and typedef x; pass 'struct x' for the tag",
        ),
        (
            "#include <sys/time.h>\nstruct a { int x; };",
            "nope",
            r"no struct or union named 'nope' in <string>; it defines: struct a \(and \d+ more from the headers",
        ),
        (
            "typedef int counter; struct a { int x; };",
            "counter",
            r"<string>:1:13: 'counter' is a typedef of int, not of a struct or union",
        ),
        ("enum e { A }; struct a { int x; };", "enum e", r"'enum e' is an enum, not a record"),
    ],
)
def test_names_that_do_not_name_one_record(src, name, message, compiler):
    with pytest.raises(lo.LayoutError, match=message):
        lo.Layout.from_c(src, name, compiler=compiler)


# ---------------------------------------------------------------------- bad input

BAD_FOR_BOTH = [
    (
        "struct a { int a : -1; };",
        r"<string>:1:16: C error: negative width in bit-field 'a' \(gcc\)",
        r"<string>:1:16: bit-field 'a' has negative width -1; give it a width from 1 to 32",
    ),
    (
        "struct a { int a : 33; };",
        r"<string>:1:16: C error: width of 'a' exceeds its type",
        r"<string>:1:16: the width of bit-field 'a' \(33\) exceeds its type \(32 bits\)",
    ),
    (
        "struct a { char x[1ULL<<40]; };",
        r"<string>:1:8: struct a is 1,099,511,627,776 bytes; layouts holds records of up to 2 GiB",
        r"<string>:1:17: array 'struct a.x' is 1,099,511,627,776 bytes; layouts holds records of up to 2 GiB",
    ),
    (
        "enum { A = 1 + 1000000000000 }; struct a { int x[A]; };",
        r"struct a is 4,000,000,000,004 bytes; layouts holds records of up to 2 GiB",
        r"array 'struct a.x' is 4,000,000,000,004 bytes; layouts holds records of up to 2 GiB",
    ),
    (
        "struct a { char x[(1 << 62) * 4]; };",
        r"<string>:1:17: C error: variably modified 'x' at file scope",
        r"<string>:1:20: the length of array 'struct a.x': the value does not fit in 64 bits",
    ),
    (
        "struct a { char x[1 << 70]; };",
        r"<string>:1:17: C error: variably modified 'x' at file scope",
        r"the length of array 'struct a.x': shift by 70 is outside 0..63",
    ),
    (
        "struct a { int x;\n  int y z; };",
        r"<string>:2:9: C error: expected .* before 'z' \(gcc\); fix the declaration",
        r"<string>:2:9: C syntax error before: z",
    ),
    (
        "struct a { mytype x; };",
        r"<string>:1:12: C error: unknown type name 'mytype' \(gcc\); declare it .* or #include its header",
        r"C syntax error",
    ),
    (
        "struct a { struct later l; };",
        r"<string>:1:25: C error: field 'l' has incomplete type \(gcc\); define that struct/union",
        r"struct later is declared but never defined",
    ),
    (
        "#include <nothere.h>\nstruct a { int x; };",
        r"<string>:1:10: C error: nothere.h: No such file or directory \(gcc\); pass include_dirs",
        r"the C preprocessor failed: <string>:1:10: fatal error: nothere.h: No such file or directory",
    ),
    (
        "struct s { int *p; };",
        r"<string>:1:17: field 'struct s.p' is a pointer: .*pass pointers='int'",
        r"<string>:1:16: field 'struct s.p' is a pointer: .*pass pointers='int'",
    ),
    (
        "struct s { int n; char data[]; };",
        r"<string>:1:24: field 'struct s.data' is a flexible array member",
        r"<string>:1:24: field 'struct s.data' is a flexible array member",
    ),
    (
        "struct s { " + "struct { " * 300 + "int x;" + "} a;" * 300 + " };",
        r"records nested more than 200 deep",
        r"nest too deeply",
    ),
    (
        "struct s { int x; } \0\0\0\1\2",
        r"<string> looks like binary data, not C declarations; did you swap",
        r"<string> looks like binary data, not C declarations; did you swap",
    ),
]


@needs_gcc
@pytest.mark.parametrize("src,by_compiler,built_in", BAD_FOR_BOTH)
def test_bad_c_is_a_layout_error_with_the_place_and_the_fix(src, by_compiler, built_in):
    with pytest.raises(lo.LayoutError, match=by_compiler):
        lo.Layout.from_c(src)
    with pytest.raises(lo.LayoutError, match=built_in):
        lo.Layout.from_c(src, compiler=None)


def test_a_data_file_given_as_the_header_is_refused_before_anything_runs(tmp_path, monkeypatch):
    data = tmp_path / "ticks.bin"
    data.write_bytes(np.random.default_rng(1).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes())
    ran = []
    monkeypatch.setattr(ccmod, "run_limited", lambda *a, **k: ran.append(a))
    for compiler in ("auto", None):
        with pytest.raises(lo.LayoutError, match=r"ticks.bin looks like binary data.*swap the header and the data"):
            lo.Layout.from_c(data, "struct tick", compiler=compiler)
    assert ran == []


def _script(path, body):
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.slow
def test_the_compiler_and_the_preprocessor_run_with_a_time_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(ccmod, "TIME_LIMIT", 0.5)
    slow_cc = _script(tmp_path / "slow-gcc", "sleep 30")
    started = time.perf_counter()
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler \(.*slow-gcc\) did not finish in 0.5 s on <string> "
        r"and was stopped \(ran for more than 0.5 s\); a huge header",
    ):
        lo.Layout.from_c("struct a { int x; };", compiler=str(slow_cc))
    slow_cpp = _script(tmp_path / "slow-cpp", "sleep 30")
    with pytest.raises(lo.LayoutError, match=r"the C preprocessor \(.*slow-cpp\) did not finish in 0.5 s"):
        lo.Layout.from_c("#define N 2\nstruct a { int x[N]; };", preprocessor=str(slow_cpp), compiler=None)
    assert time.perf_counter() - started < 10  # the sleeping children were killed, not waited for


@needs_gcc
@pytest.mark.slow
def test_a_macro_bomb_is_stopped_at_the_time_limit(monkeypatch):
    monkeypatch.setattr(ccmod, "TIME_LIMIT", 1.0)
    bomb = "#define A0 x\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 30))
    started = time.perf_counter()
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler \(.*\) did not finish in 1 s on <string> and was stopped \(ran for "
        r"more than 1 s\); a huge header, a macro that expands without end",
    ):
        lo.Layout.from_c(bomb + "struct s { int A29; };")
    assert time.perf_counter() - started < 10


@needs_gcc
def test_cc_is_honoured_and_compiler_options_are_checked(tmp_path, monkeypatch):
    log = tmp_path / "log"
    wrapper = _script(tmp_path / "my-gcc", f'echo "$@" >> {log}\nexec {FOUND.path} "$@"')
    monkeypatch.setenv("CC", str(wrapper))
    layout = lo.Layout.from_c(
        "struct cc_probe { char c; double d; };", include_dirs=[str(tmp_path)], defines={"N": "3"}, pack=2
    )
    assert layout["d"].offset == 2
    args = log.read_text()
    assert "-fno-eliminate-unused-debug-types" in args and f"-I{tmp_path}" in args and "-DN=3" in args
    assert "-fpack-struct=2" in args
    with pytest.raises(
        lo.LayoutError,
        match=r"compiler='no-such-cc' names a C compiler that is not installed: "
        r"'no-such-cc' was looked for on PATH .* pass the name or path",
    ):
        lo.Layout.from_c("struct a { int x; };", compiler="no-such-cc")
    with pytest.raises(lo.LayoutError, match=r"compiler must be 'auto', None, False, True or the name/path"):
        lo.Layout.from_c("struct a { int x; };", compiler=3)
    with pytest.raises(lo.LayoutError, match=r"preprocessor=False and a compiler were both asked for"):
        lo.Layout.from_c("struct a { int x; };", compiler="gcc", preprocessor=False)
    monkeypatch.delenv("CC")
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(lo.LayoutError, match=r"compiler=True but no C compiler \(\$CC, gcc, cc, clang\) is on PATH"):
        lo.Layout.from_c("struct a { int x; };", compiler=True)
    # "auto" without a compiler: the built-in path, silently
    assert lo.Layout.from_c("struct a { int x; };").itemsize == 4


MISSING_CC = "layouts-test-i686-linux-gnu-gcc"  # a cross compiler that is not installed here
CHAR_LL = "struct s { char c; long long l; };"  # 16 bytes on x86-64 and arm64, 12 on i386, 9 packed


def test_a_cc_that_is_not_installed_is_an_error_never_the_host_compiler(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CC", MISSING_CC)
    message = (
        rf"CC='{MISSING_CC}' names a C compiler that is not installed: '{MISSING_CC}' was looked for on "
        rf"PATH \(.+\) and not found; install it, or unset CC \(layouts then uses gcc, cc or clang from "
        rf"PATH\), or pass compiler=None \(layouts inspect --compiler none\)"
    )
    for compiler in ("auto", True):
        with pytest.raises(lo.LayoutError, match=message):
            lo.Layout.from_c(CHAR_LL, compiler=compiler)
    header = tmp_path / "s.h"
    header.write_text(CHAR_LL)
    assert main(["inspect", str(header)]) == 1
    assert re.search(rf"layouts inspect: error: {message}", capsys.readouterr().err)
    assert main(["inspect", str(header), "--compiler", "none"]) == 0  # the fix the message gives
    assert capsys.readouterr().out.startswith("struct s: ")
    monkeypatch.setenv("CC", str(tmp_path / "bin" / "gcc"))
    with pytest.raises(
        lo.LayoutError,
        match=r"CC='.*/bin/gcc' names a C compiler that is not installed: "
        r"'.*/bin/gcc' does not exist; install it, or unset CC",
    ):
        lo.Layout.from_c(CHAR_LL)
    header.chmod(0o644)
    monkeypatch.setenv("CC", f"{header} -m32")
    with pytest.raises(
        lo.LayoutError,
        match=r"CC='.*s.h -m32' names a C compiler that is not installed: "
        r"'.*s.h' exists but is not an executable file",
    ):
        lo.Layout.from_c(CHAR_LL)
    monkeypatch.setenv("CC", '"gcc -m32')
    with pytest.raises(
        lo.LayoutError,
        match=r"""CC='"gcc -m32': cannot split it into a program and its options """
        r"\(No closing quotation\); quote it as a shell would",
    ):
        lo.Layout.from_c(CHAR_LL)


@needs_gcc
def test_cc_with_options_or_behind_a_wrapper_is_honoured(tmp_path, monkeypatch):
    native = lo.Layout.from_c(CHAR_LL, compiler=FOUND.path)
    assert (native.itemsize, native["l"].offset) == (16, 8)
    monkeypatch.setenv("CC", f"{FOUND.path} -fpack-struct=1")
    packed = lo.Layout.from_c(CHAR_LL)
    assert (packed.itemsize, packed["l"].offset, packed.alignment) == (9, 1, 1)
    log = tmp_path / "log"
    wrapper = _script(tmp_path / "wrap", f'echo "$@" >> {log}\nexec "$@"')  # runs what follows it, as ccache does
    monkeypatch.setenv("CC", f"{wrapper} {FOUND.path} -fpack-struct=2")
    assert lo.Layout.from_c(CHAR_LL).itemsize == 10
    lines = log.read_text().splitlines()
    assert f"{FOUND.path} -fpack-struct=2 --version" in lines  # gcc or clang: the wrapped compiler is asked
    assert any(line.startswith(f"{FOUND.path} -fpack-struct=2 -x c -std=gnu11") for line in lines)
    monkeypatch.setenv("CC", f"  {FOUND.path}   -fpack-struct=1 ")
    assert lo.Layout.from_c(CHAR_LL, compiler=True) == packed


@needs_gcc
def test_cc_for_i386_gives_the_i386_layout(monkeypatch):
    probe = subprocess.run(
        [FOUND.path, "-m32", "-x", "c", "-c", "-o", os.devnull, "-"], input="int x;", capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"gcc here does not compile for i386 (-m32): {probe.stderr.strip()[:80]}")
    monkeypatch.setenv("CC", f"{FOUND.path} -m32")
    i386 = lo.Layout.from_c(CHAR_LL)
    assert (i386.itemsize, i386["l"].offset, i386.alignment) == (12, 4, 4)  # the i386 System V ABI
    monkeypatch.delenv("CC")
    assert lo.Layout.from_c(CHAR_LL, compiler=f"{FOUND.path} -m32") == i386
    assert lo.Layout.from_c(CHAR_LL).itemsize == 16


def test_a_compiler_that_exists_but_does_not_work_is_named_with_the_fix(tmp_path, monkeypatch):
    silent = _script(tmp_path / "broken-gcc", "exit 1")
    with pytest.raises(
        lo.LayoutError,
        match=(
            rf"the C compiler {re.escape(str(silent))} \(named by compiler='.*broken-gcc'\) does not work: "
            rf"`.*broken-gcc -x c -c -o x.o empty.c` exited with status 1 and printed nothing; fix or install "
            rf"it, or pass another compiler=\.\.\., or compiler=None \(layouts inspect --compiler none\)"
        ),
    ):
        lo.Layout.from_c(CHAR_LL, compiler=str(silent))
    talks = _script(tmp_path / "expired-gcc", 'echo "expired-gcc: licence expired" >&2; exit 3')
    monkeypatch.setenv("CC", f"{talks} -m32")
    with pytest.raises(
        lo.LayoutError,
        match=(
            r"the C compiler .*expired-gcc -m32 \(named by CC='.*expired-gcc -m32'\) does not work: `.*expired-gcc "
            r"-m32 -x c -c -o x.o empty.c` exited with status 3: expired-gcc: licence expired; fix or install it, "
            r"or unset CC"
        ),
    ):
        lo.Layout.from_c(CHAR_LL)
    lazy = _script(tmp_path / "lazy-gcc", "exit 0")  # says yes, writes nothing
    monkeypatch.setenv("CC", str(lazy))
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler .*lazy-gcc \(named by CC=.*\) does not work: "
        r"`.*` wrote no ELF object file and printed nothing; fix or install it",
    ):
        lo.Layout.from_c(CHAR_LL)
    garbage = tmp_path / "garbage-gcc"
    garbage.write_bytes(b"\x00\x01 not a program")
    garbage.chmod(0o755)
    monkeypatch.setenv("CC", str(garbage))
    with pytest.raises(
        lo.LayoutError,
        match=r"could not run the C compiler .*garbage-gcc \(named by CC=.*\): "
        r"Exec format error; fix or install it, or unset CC",
    ):
        lo.Layout.from_c(CHAR_LL)
    header = tmp_path / "s.h"
    header.write_text(CHAR_LL)
    monkeypatch.setenv("CC", str(silent))
    with pytest.raises(lo.LayoutError, match=r"the C compiler .*broken-gcc .* does not work"):
        from layouts._cdecl import record_names

        record_names(header)


# --------------------------------------------------------------------------- cost


def _big_struct_seconds(compiler, fields):
    src = "struct big {\n" + "".join(f"  int f{i}; unsigned b{i}:3;\n" for i in range(fields // 2)) + "};\n"
    started = time.perf_counter()
    layout = lo.Layout.from_c(src, compiler=compiler)
    elapsed = time.perf_counter() - started
    assert len(layout.fields) == fields
    return elapsed


@needs_cc
@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["auto", None])
def test_cost_is_linear_in_the_fields(compiler):
    """5x the fields costs well under 25x the time (quadratic would be 25x): a growth
    ratio, so a loaded machine slows both sizes alike; the best of two runs each."""
    small = min(_big_struct_seconds(compiler, 2000) for _ in range(2))
    large = min(_big_struct_seconds(compiler, 10000) for _ in range(2))
    assert large < 12 * small + 0.5, f"2,000 fields took {small:.2f} s, 10,000 took {large:.2f} s"


# ---------------------------------------------------------------- fuzzing: no hang, no raw error

_PIECES = [
    "{",
    "}",
    ";",
    ":",
    "[",
    "]",
    "(",
    ")",
    "*",
    ",",
    " int ",
    " char ",
    " struct ",
    " union ",
    " enum ",
    " unsigned ",
    " long ",
    " 0 ",
    " -1 ",
    " 1ULL<<40 ",
    " sizeof(int) ",
    " __attribute__((packed)) ",
    "\n#pragma pack(3)\n",
    "\n#pragma pack(push, 2)\n",
    " _Alignas(8) ",
    " __int128 ",
    " long double ",
    " x ",
    " y ",
    " = ",
    " 1 + 1000000000000 ",
    "\n#define X X X\n",
    " typedef ",
    " : 3 ",
    "[0]",
    "\\",
]


_REAL = [p.read_text() for p in map(Path, ["/usr/include/netinet/ip.h", "/usr/include/netinet/tcp.h"]) if p.is_file()]


@st.composite
def mutated_headers(draw):
    text = draw(
        st.sampled_from(
            [
                TICK_H,
                DECLARATIONS["struct bf"],
                DECLARATIONS["struct en"],
                "#include <stdint.h>\nstruct r { uint8_t a : 3; int b[2]; };",
                *_REAL,
            ]
        )
    )
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 8))
        text = text[:at] + draw(st.sampled_from(_PIECES + [""])) + text[at + cut :]
    return text


def _only_layout_or_layout_error(text, compiler):
    for name in (None, "struct r", "tick_t", "struct iphdr"):
        try:
            lo.Layout.from_c(text, name, compiler=compiler, pointers="int")
        except lo.LayoutError:
            pass


@pytest.mark.slow
@needs_cc
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_headers())
def test_mutated_headers_give_a_layout_or_a_layout_error_with_the_compiler(text):
    _only_layout_or_layout_error(text, "auto")


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mutated_headers(), st.text(alphabet="".join(set("".join(_PIECES))) + "abz09_#\n\0", max_size=80)))
def test_mutated_headers_and_random_text_give_a_layout_or_a_layout_error_without_it(text):
    _only_layout_or_layout_error(text, None)


def test_random_text_never_reaches_the_compiler_as_a_path(tmp_path, monkeypatch):
    # a name that is not a file is an error naming it; so is a directory, saying what it is
    monkeypatch.chdir(tmp_path)
    os.mkdir("dir.h")
    with pytest.raises(lo.LayoutError, match=re.escape("no such header file: 'nothing.h'")):
        lo.Layout.from_c("nothing.h")
    with pytest.raises(lo.LayoutError, match=re.escape("'dir.h' is a directory, not a regular file; a C header")):
        lo.Layout.from_c("dir.h")


@needs_cc
@pytest.mark.parametrize("pack", [1, pytest.param(2, marks=pytest.mark.slow), 4])
@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_pack_gives_the_same_layout_on_both_paths(name, pack):
    try:
        built_in = lo.Layout.from_c(DECLARATIONS[name], name, pack=pack, pointers="int", compiler=None)
    except lo.LayoutError as err:  # the built-in path's documented limits
        assert re.search(r"bit-fields under #pragma pack|zero-width bit-field", str(err)), err
        return
    assert lo.Layout.from_c(DECLARATIONS[name], name, pack=pack, pointers="int") == built_in


@pytest.mark.skipif(
    FOUND is None or not FOUND.is_gcc or __import__("shutil").which("clang") is None, reason="needs both gcc and clang"
)
@pytest.mark.parametrize(
    "name",
    [
        "tick_t",
        "struct p1",
        "struct pa",
        "struct en",
        "struct ps",
        "struct p4",
        "struct pz",
        "struct vs",
        "struct i1",
        "Elf64_Shdr",
        "struct sigaction",
    ],
)
def test_clang_and_gcc_give_the_same_layout(name):
    src = {**BOTH, **ONLY_CC}[name]
    by_gcc = lo.Layout.from_c(src, name, pointers="int", compiler="gcc")
    by_clang = lo.Layout.from_c(src, name, pointers="int", compiler="clang")
    assert by_clang == by_gcc


@pytest.mark.skipif(__import__("shutil").which("clang") is None, reason="needs clang (its --target)")
def test_a_target_abi_given_with_the_compiler():
    src = "#include <stdint.h>\nstruct r { char c; double d; long l; unsigned a:3, b:7; void *p; };"
    i386 = lo.Layout.from_c(src, compiler="clang --target=i386-linux-gnu -ffreestanding", pointers="int")
    assert [(f.name, f.offset, f.dtype.str) for f in i386.fields] == [
        ("c", 0, "|i1"),
        ("d", 4, "<f8"),
        ("l", 12, "<i4"),
        ("a", 16, "|u1"),
        ("b", 16, "<u2"),
        ("p", 20, "<u4"),
    ]
    assert (i386.itemsize, i386.alignment) == (24, 4)
    mips = lo.Layout.from_c(src, compiler="clang --target=mips-linux-gnu -ffreestanding", pointers="int")
    assert mips.dtype["d"] == np.dtype(">f8") and mips["d"].offset == 8 and mips.itemsize == 32
    assert mips.c.bits[0][:3] == ("a", 5, 3)  # bit 0 is the most significant bit there


@pytest.mark.parametrize("error", [KeyError("x"), SystemError("bad"), MemoryError(), RecursionError()])
def test_an_unexpected_python_error_becomes_a_layout_error(monkeypatch, error):
    from layouts._cdecl import types

    def boom(*args, **kwargs):
        raise error

    monkeypatch.setattr(types.Types, "of_record", boom)
    message = {
        RecursionError: r"nest too deeply",
        MemoryError: r"<string>: out of memory while laying out the C declarations; run with more memory",
    }.get(type(error), rf"<string>: the C declarations could not be laid out \({type(error).__name__}")
    with pytest.raises(lo.LayoutError, match=message):
        lo.Layout.from_c("struct a { int x; };", compiler=None)


@pytest.mark.skipif(FOUND is None, reason="needs a C compiler")
def test_an_edited_included_header_or_another_cwd_is_compiled_again(tmp_path, monkeypatch):
    # the compile cache was keyed on the main file's text: an edited sub.h gave the old layout
    sub = tmp_path / "sub.h"
    sub.write_text("typedef char T;\n")
    main_h = tmp_path / "main.h"
    main_h.write_text('#include "sub.h"\nstruct s { char c; T v; };\n')
    assert lo.Layout.from_c(main_h, "s").itemsize == 2
    from layouts._cdecl import record_names

    assert record_names(main_h) == ["struct s"]
    sub.write_text("typedef double T;\n")
    assert lo.Layout.from_c(main_h, "s").itemsize == 16
    sub.write_text("typedef short T;\n")
    assert lo.Layout.from_c(main_h, "s").itemsize == 4
    src = '#include "sub.h"\nstruct s { char c; T v; };'
    for folder, typedef, size in (("a", "char", 2), ("b", "double", 16), ("a", "char", 2)):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "sub.h").write_text(f"typedef {typedef} T;\n")
        monkeypatch.chdir(tmp_path / folder)
        assert lo.Layout.from_c(src, "s").itemsize == size, folder
    monkeypatch.setenv("CC", f"{FOUND.path} -DT=int")  # the compiler's options are part of the key
    assert lo.Layout.from_c("struct s { char c; T v; };", "s").itemsize == 8


def _in_child(code, timeout=120):
    """Run ``code`` in a child Python (a hang there fails the test at ``timeout``, never
    blocks the run); its stdout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), str(Path(__file__).parent)])}
    run = subprocess.run(
        [__import__("sys").executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@needs_gcc
def test_a_compiler_that_writes_its_object_as_a_fifo_is_refused_without_blocking(tmp_path):
    wrapper = _script(
        tmp_path / "fifo-gcc",
        f'{FOUND.path} "$@" || exit $?\n'
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
        '[ -n "$out" ] && rm -f "$out" && mkfifo "$out"\nexit 0',
    )
    out = _in_child(f"""
import layouts as lo
try:
    lo.Layout.from_c("struct a {{ int x; }};", compiler={str(wrapper)!r})
except lo.LayoutError as err:
    print(err)
""")
    assert re.search(
        r"the C compiler's output '.*\.o' is a FIFO \(named pipe\), not a regular file; the C "
        r"compiler .*fifo-gcc \(named by compiler=.*\) must write its object file as a regular file; "
        r"fix or install it",
        out,
    ), out


@pytest.mark.slow
@needs_gcc
def test_an_include_of_a_fifo_says_so_at_the_time_limit(tmp_path):
    os.mkfifo(tmp_path / "fifo.h")
    (tmp_path / "main.h").write_text('#include "fifo.h"\nstruct s { int a; };\n')
    for preprocessor in ("'auto'", "None"):  # the compiler, and the built-in path's cpp
        out = _in_child(f"""
import layouts as lo
from layouts._cdecl import compiler
compiler.TIME_LIMIT = 1.0
try:
    lo.Layout.from_c({str(tmp_path / "main.h")!r}, compiler={preprocessor})
except lo.LayoutError as err:
    print(err)
""")
        assert re.search(
            r"\) did not finish in 1 s on .*main.h and was stopped: it was reading '.*fifo.h', which "
            r"is a FIFO \(named pipe\), not a header file \(a FIFO waits for a writer, a device such "
            r"as /dev/zero never ends\); #include only regular files",
            out,
        ), out
    (tmp_path / "zero.h").write_text('#include "/dev/zero"\nstruct s { int a; };\n')
    out = _in_child(f"""
import layouts as lo
from layouts._cdecl import compiler
compiler.TIME_LIMIT = 1.0
try:
    lo.Layout.from_c({str(tmp_path / "zero.h")!r})
except lo.LayoutError as err:
    print(err)
""")
    assert re.search(
        r"did not finish in 1 s on .*zero.h and was stopped: it was reading '/dev/zero', which is a "
        r"character device, not a header file",
        out,
    ), out


def test_a_compiler_that_hangs_on_version_is_stopped_soon_with_its_children(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    hang = _script(tmp_path / "mycc", f"sleep 300 &\necho $! > {pids}\nwait")
    monkeypatch.setattr(ccmod, "PROBE_LIMIT", 0.5)
    ccmod._is_clang.cache_clear()
    started = time.perf_counter()
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler .*mycc did not answer `.*mycc --version` in 0.5 s "
        r"and was stopped \(with what it started\); it would hang on the "
        r"declarations too: fix it, or name another compiler",
    ):
        lo.Layout.from_c("struct a { int x; };", compiler=str(hang))
    assert time.perf_counter() - started < 20  # one short limit, not the compile's 30 s on top
    child = int(pids.read_text())
    for _ in range(100):  # the sleep the probe started was killed with it (a zombie is dead too)
        try:
            state = Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the probe's child {child} is still running")


@needs_gcc
def test_relative_paths_in_cc_and_compiler_are_the_callers(tmp_path, monkeypatch):
    # the compiler ran in a temporary folder: ./wrap.sh and -Iinc were not found there
    (tmp_path / "cc").mkdir()
    _script(tmp_path / "cc" / "wrap.sh", f'exec {FOUND.path} "$@"')
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "def.h").write_text("typedef double T;\n")
    (tmp_path / "cfg.h").write_text("#define N 3\n")
    monkeypatch.chdir(tmp_path)
    src = '#include "def.h"\nstruct s { char c; T v[N]; };'
    monkeypatch.setenv("CC", "./cc/wrap.sh -Iinc -include cfg.h")
    assert lo.Layout.from_c(src, "s").itemsize == 32
    monkeypatch.delenv("CC")
    assert lo.Layout.from_c(src, "s", compiler="cc/wrap.sh -I inc -DN=1").itemsize == 16
    assert lo.Layout.from_c(src, "s", compiler="./cc/wrap.sh -Iinc -DN=2").itemsize == 24
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the same words, from another folder: not there
    with pytest.raises(
        lo.LayoutError,
        match=r"compiler='./cc/wrap.sh -Iinc -DN=2' names a C compiler that is "
        r"not installed: './cc/wrap.sh' does not exist",
    ):
        lo.Layout.from_c(src, "s", compiler="./cc/wrap.sh -Iinc -DN=2")


@pytest.mark.parametrize("value", [" ", "\t\n "])
def test_a_cc_of_only_blanks_is_an_error_never_the_host_compiler(monkeypatch, value):
    monkeypatch.setenv("CC", value)
    with pytest.raises(
        lo.LayoutError,
        match=rf"CC={re.escape(repr(value))} names no program; name a C compiler "
        r"\(gcc, clang, a path\), or unset CC \(layouts then uses gcc, cc or "
        r"clang from PATH\) or pass compiler=None",
    ):
        lo.Layout.from_c(CHAR_LL)
    with pytest.raises(
        lo.LayoutError,
        match=r"compiler=' ' names no program; name a C compiler \(gcc, clang, a "
        r"path\) or pass compiler=None",
    ):
        lo.Layout.from_c(CHAR_LL, compiler=" ")
    monkeypatch.setenv("CC", "")  # empty is unset
    assert lo.Layout.from_c(CHAR_LL) == lo.Layout.from_c(CHAR_LL, compiler=None)


@pytest.mark.parametrize("compiler", ["auto", None])
@pytest.mark.parametrize("name", [b'q"uote.h', b"back\\slash.h", b"\xff\xfe.h", b"new\nline.h", b"tab\t.h"])
def test_header_paths_with_quotes_backslashes_and_bytes_that_are_not_utf8(tmp_path, name, compiler):
    # the generated #include "<path>" was not escaped (and C has no escape for a quote
    # there): wrong errors with the compiler, "defines 0 structs" without it
    path = os.path.join(os.fsencode(tmp_path), name)
    with open(path, "wb") as f:
        f.write(b"struct s { char c; long long l; };\n")
    layout = lo.Layout.from_c(Path(os.fsdecode(path)), compiler=compiler)
    assert (layout.itemsize, layout.c.name) == (16, "struct s")
    with open(path, "ab") as f:
        f.write(b"struct t { int x[; };\n")
    with pytest.raises(lo.LayoutError, match=r"\.h:2:\d+: C (syntax )?error"):
        lo.Layout.from_c(Path(os.fsdecode(path)), "struct s", compiler=compiler)


def test_an_empty_source_says_so():
    for source in ("", "  "):  # was "'.' is a directory"
        with pytest.raises(
            lo.LayoutError,
            match=r"the source is empty \('\s*'\): pass C declarations as text "
            r"\('struct s \{ int x; \};'\) or the path of a header file",
        ):
            lo.Layout.from_c(source)


@needs_gcc
def test_a_header_that_declares_nothing_is_not_told_to_rebuild_with_g(tmp_path):
    for text in ("", "/* nothing */\n#define N 3\n"):  # was: "has no DWARF ...; rebuild it with -g"
        (tmp_path / "e.h").write_text(text)
        with pytest.raises(
            lo.LayoutError,
            match=r"e.h declares no types: the source defines 0 structs/unions \(it "
            r"is empty, or only comments or macros\); pass the header",
        ):
            lo.Layout.from_c(tmp_path / "e.h")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
@pytest.mark.parametrize("compiler", ["auto", None])
def test_a_file_whose_size_says_zero_is_read_for_its_text(compiler):
    # /proc files have st_size 0: the compiler and cpp read them as empty
    with pytest.raises(lo.LayoutError, match=r"/proc/self/status:1:\d+: C (syntax )?error"):
        lo.Layout.from_c("/proc/self/status", compiler=compiler)


@needs_gcc
def test_a_compiler_that_writes_a_truncated_object_or_is_killed_is_named(tmp_path):
    trunc = _script(
        tmp_path / "trunc-gcc",
        f'{FOUND.path} "$@" || exit $?\n'
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
        '[ -n "$out" ] && truncate -s 100 "$out"\nexit 0',
    )
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler .*trunc-gcc \(named by compiler=.*\) wrote an object "
        r"file for <string> that pyelftools cannot read \(.*\): a truncated or "
        r"damaged ELF file; fix or install it",
    ):
        lo.Layout.from_c("struct a { int x; };", compiler=str(trunc))
    killed = _script(tmp_path / "killed-gcc", f'case "$*" in *-E*) exec {FOUND.path} "$@";; esac\nkill -SEGV $$')
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler .*killed-gcc \(named by .*\) was killed by signal "
        r"SIGSEGV \(11\) while compiling <string> \(out of memory, a crash",
    ):
        lo.Layout.from_c("struct a { int x; };", compiler=str(killed))


def test_from_dwarf_of_none_names_what_it_reads():
    for call in (lo.Layout.from_dwarf, __import__("layouts._cdecl", fromlist=["x"]).dwarf_record_names):
        with pytest.raises(
            lo.LayoutError,
            match=r"from_dwarf reads the path of an ELF object, executable or shared "
            r"library built with -g \(a str or os.PathLike such as 'prog.o'\), "
            r"got NoneType",
        ):
            call(None)


@needs_gcc
def test_a_cc_with_thousands_of_options_gives_a_short_message(monkeypatch):
    monkeypatch.setenv("CC", f"{FOUND.path} " + " ".join(["-DX=1"] * 40000) + " -fno-such-option")
    with pytest.raises(
        lo.LayoutError,
        match=r"the C compiler .*gcc -DX=1 .* \.\.\.\[[\d,]+ characters\]\.\.\. "
        r".*-fno-such-option \(named by CC=",
    ) as err:
        lo.Layout.from_c("struct a { int x; };")
    assert len(str(err.value)) < 3000


@needs_gcc
def test_a_compiler_that_leaves_a_background_child_holding_its_output_is_not_waited_for(tmp_path, monkeypatch):
    # its output went to pipes: the child kept them open, and the compile ran into the time limit
    pids = tmp_path / "pids"
    wrapper = _script(tmp_path / "bg-gcc", f'(sleep 300 & echo $! >> {pids})\nexec {FOUND.path} "$@"')
    monkeypatch.setattr(ccmod, "TIME_LIMIT", 120.0)  # a regression fails here, not in 30 s
    assert lo.Layout.from_c("struct bg { char c; double d; };", compiler=str(wrapper)).itemsize == 16
    for child in map(int, pids.read_text().split()):  # and what it left running was stopped
        for _ in range(100):
            try:
                if Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"the compiler's background child {child} is still running")
