"""Layout.from_dwarf and ``layouts inspect`` on objects, executables and shared libraries
built with -g: the record types of the program that wrote the files."""

import json
import subprocess
import sys

import pytest
from cprobe import CC

import layouts as lo
from layouts._cli import main

needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine")

HEADER = """
#include <stdint.h>
enum side { BUY = 1, SELL = 2 };
typedef struct quote { double px; int32_t qty; } quote_t;
struct tick {
    int64_t ts;
    char sym[8];
    quote_t q[2];
    enum side side;
    uint32_t a : 3, b : 5;
    int s : 4;
    union { float f; int32_t i; } u;
    unsigned short arr[2][3];
    int tail[0];
};
"""

PROGRAM = (
    HEADER
    + r"""
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "wb");
    for (int i = 0; i < 100; i++) {
        struct tick t;
        memset(&t, 0, sizeof t);
        t.ts = 1000 * i; snprintf(t.sym, sizeof t.sym, "S%d", i);
        t.q[0].px = i * 0.5; t.q[0].qty = -i; t.q[1].px = i; t.q[1].qty = 2 * i;
        t.side = i % 2 ? BUY : SELL; t.a = i % 8; t.b = i % 32; t.s = i % 16 - 8; t.u.i = 7 * i;
        t.arr[1][2] = i;
        fwrite(&t, sizeof t, 1, f);
    }
    fclose(f);
    return 0;
}
"""
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """tick.h, and tick.o / tick (executable) / libtick.so built from it with -g."""
    if CC is None:
        pytest.skip("no C compiler on this machine")
    tmp = tmp_path_factory.mktemp("dwarf")
    (tmp / "tick.h").write_text(HEADER)
    (tmp / "tick.c").write_text(PROGRAM)
    files = {
        "header": tmp / "tick.h",
        "obj": tmp / "tick.o",
        "exe": tmp / "tick",
        "so": tmp / "libtick.so",
        "old": tmp / "tick-dwarf2.o",
        "stripped": tmp / "tick-nodebug.o",
    }
    for args in (
        ["-c", "-o", files["obj"]],
        ["-o", files["exe"]],
        ["-shared", "-fPIC", "-o", files["so"]],
        ["-c", "-gdwarf-2", "-gstrict-dwarf", "-o", files["old"]],
    ):
        subprocess.run([CC, "-g", "-O0", "-std=gnu11", *map(str, args), str(tmp / "tick.c")], check=True)
    subprocess.run([CC, "-c", "-O0", "-o", str(files["stripped"]), str(tmp / "tick.c")], check=True)
    return files


@needs_cc
@pytest.mark.parametrize("kind", ["obj", "exe", "so", "old"])
def test_from_dwarf_gives_the_layout_from_c_gives(built, kind):
    from_c = lo.Layout.from_c(built["header"], "struct tick")
    from_bin = lo.Layout.from_dwarf(built[kind], "struct tick")
    assert from_bin.dtype == from_c.dtype
    assert from_bin.c.bits == from_c.c.bits and from_bin.c.enums == from_c.c.enums
    assert from_bin.c.ctypes == from_c.c.ctypes and from_bin.c.notes == from_c.c.notes
    assert from_bin.alignment == from_c.alignment == 8
    assert from_bin.c.source == str(built[kind])
    assert lo.Layout.from_dwarf(built[kind], "quote_t").itemsize == 16


@needs_cc
def test_from_dwarf_reads_what_the_program_wrote(built, tmp_path):
    subprocess.run([str(built["exe"]), str(tmp_path / "ticks.bin")], check=True)
    raw = (tmp_path / "ticks.bin").read_bytes()
    layout = lo.Layout.from_dwarf(built["exe"], "tick", bytes_as="string", unions={"u": "i"})
    rows = lo.AoS(raw, layout).to_soa().to_arrow().to_pylist()
    assert len(rows) == 100
    r = rows[37]
    assert (r["ts"], r["sym"], r["q"][0]["qty"], r["side"], r["a"], r["b"], r["s"], r["u"]["i"], r["arr"][1][2]) == (
        37000,
        "S37",
        -37,
        "BUY",
        5,
        5,
        5 - 8,
        259,
        37,
    )
    assert lo.SoA.from_arrow(lo.AoS(raw, layout).to_soa().to_arrow(), layout).to_aos().array.tobytes() == raw


@needs_cc
def test_from_dwarf_errors_name_the_file_and_the_fix(built, tmp_path):
    with pytest.raises(lo.LayoutError, match=r"tick-nodebug.o has no DWARF debug information; rebuild it with -g"):
        lo.Layout.from_dwarf(built["stripped"], "struct tick")
    with pytest.raises(lo.LayoutError, match=r"tick.h is not an ELF object, executable or shared library"):
        lo.Layout.from_dwarf(built["header"], "struct tick")
    with pytest.raises(lo.LayoutError, match=r"cannot read '.*missing.o'"):
        lo.Layout.from_dwarf(tmp_path / "missing.o", "struct tick")
    with pytest.raises(
        lo.LayoutError,
        match=r"no struct or union named 'nope' in .*tick.o; it defines: "
        r"struct quote, struct tick",
    ):
        lo.Layout.from_dwarf(built["obj"], "nope")
    with pytest.raises(lo.LayoutError, match=r"defines 2 structs/unions \(struct quote, struct tick\)"):
        lo.Layout.from_dwarf(built["obj"])
    truncated = tmp_path / "cut.o"
    truncated.write_bytes(built["obj"].read_bytes()[:600])
    with pytest.raises(lo.LayoutError, match=r"cut.o"):
        lo.Layout.from_dwarf(truncated, "struct tick")


@needs_cc
@pytest.mark.parametrize("kind", ["obj", "exe", "so"])
def test_inspect_reads_objects_executables_and_libraries(built, kind, capsys):
    assert main(["inspect", str(built[kind]), "struct tick"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("struct tick: 72 bytes per record, alignment 8, 11 leaf fields, 10 padding bytes")
    assert "note: field 'tail' (int[0]) is a zero-length array: no bytes, no column" in out
    assert main(["inspect", str(built[kind]), "--json"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in every] == ["struct quote", "struct tick"]
    assert every[1]["notes"] == ["field 'tail' (int[0]) is a zero-length array: no bytes, no column"]


@needs_cc
def test_inspect_of_a_data_file_is_one_line_and_quick(built, tmp_path):
    data = tmp_path / "ticks.bin"
    data.write_bytes(bytes(range(256)) * 4096)
    run = subprocess.run(
        [sys.executable, "-m", "layouts", "inspect", str(data)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"layouts inspect: error: {data} looks like binary data, not C declarations; "
        f"did you swap the header and the data file? Pass the C header (or the "
        f"declarations as text) as the source"
    )


@needs_cc
def test_dwarf_2_offsets_beyond_one_leb128_byte(tmp_path):
    (tmp_path / "w.c").write_text(
        "struct w { char pad[300]; int x; unsigned a:3, b:9; double d[20]; int y; };\nstruct w v;\n"
    )
    for name, flags in (("w2.o", ["-gdwarf-2", "-gstrict-dwarf"]), ("w5.o", [])):
        subprocess.run([CC, "-c", "-g", *flags, "-o", str(tmp_path / name), str(tmp_path / "w.c")], check=True)
    old, new = lo.Layout.from_dwarf(tmp_path / "w2.o", "w"), lo.Layout.from_dwarf(tmp_path / "w5.o", "w")
    assert old.dtype == new.dtype and old.c.bits == new.c.bits
    assert (old["x"].offset, old["y"].offset, old.itemsize) == (300, 472, 480)
    assert old.dtype == lo.Layout.from_c(tmp_path / "w.c", "struct w").dtype


ALIGNMENTS = """
struct packed_in { int a; } __attribute__((packed));
struct holds_packed { char c; struct packed_in x; long long y; };
struct complex_f { char c; float _Complex z; };
struct vector { char c; int v __attribute__((vector_size(16))); };
#pragma pack(4)
struct pack4 { char c; long long l; };
struct pack4_big_first { double d; char c; long long l; int pad; };
#pragma pack()
struct holds_pack4 { char x; struct pack4 in; };
struct packed { char c; double d; } __attribute__((packed));
struct packed_tail { int a; char b; } __attribute__((packed));
struct aligned_in_packed { short s; char c[3]; } __attribute__((packed, aligned(2)));
struct bits { char c; long long x : 4; };
struct plain { char c; double d; short s; };
"""
ALIGNED = [line.split()[1] for line in ALIGNMENTS.splitlines() if line.startswith("struct ")]


@needs_cc
def test_from_dwarf_alignment_is_the_compilers_alignof(tmp_path):
    # DWARF writes an alignment only where the source did: the rest is inferred as the
    # compiler lays it out, and was wrong for a packed record inside a plain one, complex
    # numbers, vectors and #pragma pack
    (tmp_path / "al.c").write_text(ALIGNMENTS + "".join(f"struct {n} v_{n};\n" for n in ALIGNED))
    subprocess.run([CC, "-g", "-c", "-o", str(tmp_path / "al.o"), str(tmp_path / "al.c")], check=True)
    from cprobe import run_c

    printed = run_c(
        ALIGNMENTS
        + "#include <stdio.h>\nint main(void) {\n"
        + "".join(f'printf("%zu\\n", _Alignof(struct {n}));\n' for n in ALIGNED)
        + "}\n"
    ).split()
    got = [lo.Layout.from_dwarf(tmp_path / "al.o", f"struct {n}").alignment for n in ALIGNED]
    want = dict(zip(ALIGNED, map(int, printed)))
    # a packed record whose members all sit where they would unpacked has no trace of the
    # packing in DWARF (docs/c-declarations.md says so): only where it is used shows it
    assert want.pop("packed_in") == 1
    assert {n: a for n, a in zip(ALIGNED, got) if n != "packed_in"} == want


@needs_cc
def test_from_dwarf_alignment_for_i386(tmp_path):
    src = (
        "struct ll { char c; long long l; double d; };\nstruct f { char c; float _Complex z; };\n"
        "struct ll v1; struct f v3;\n"
    )
    (tmp_path / "i.c").write_text(src)
    built = subprocess.run(
        [CC, "-m32", "-g", "-c", "-o", str(tmp_path / "i.o"), str(tmp_path / "i.c")], capture_output=True, text=True
    )
    if built.returncode != 0:
        pytest.skip(f"the compiler here does not build for i386: {built.stderr[:80]}")
    for name in ("struct ll", "struct f"):  # the compiler's _Alignof, with -m32
        assert (
            lo.Layout.from_dwarf(tmp_path / "i.o", name).alignment
            == lo.Layout.from_c(tmp_path / "i.c", name, compiler=f"{CC} -m32").alignment
            == 4
        ), name


def _patched(tmp_path, name, flags, patch, members=2):
    """An object built from a small struct with ``flags``, its section ``name`` changed by
    ``patch(data, header_offset, section)`` (ELF64 little-endian offsets)."""
    from elftools.elf.elffile import ELFFile

    fields = "".join(f" int field_number_{i};" for i in range(members - 1))  # many: worth compressing
    (tmp_path / "p.c").write_text(f"struct p {{ double b;{fields} }}; struct p v;\n")
    built = subprocess.run(
        [CC, "-g", *flags, "-c", "-o", str(tmp_path / "p.o"), str(tmp_path / "p.c")], capture_output=True, text=True
    )
    if built.returncode != 0:
        pytest.skip(f"the compiler here does not take {flags}: {built.stderr[:80]}")
    data = bytearray((tmp_path / "p.o").read_bytes())
    with open(tmp_path / "p.o", "rb") as f:
        elf = ELFFile(f)
        if elf.elfclass != 64 or not elf.little_endian:
            pytest.skip("the patch offsets are those of ELF64 little-endian")
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == name)
        section = elf.get_section(index)
        patch(data, elf["e_shoff"] + index * elf["e_shentsize"], section)
    (tmp_path / "bad.o").write_bytes(bytes(data))
    return tmp_path / "bad.o"


@needs_cc
def test_a_debug_section_that_claims_bytes_the_file_does_not_hold_is_refused(tmp_path):
    def nobits(data, header, section):
        data[header + 4 : header + 8] = (8).to_bytes(4, "little")  # SHT_NOBITS
        data[header + 32 : header + 40] = (1 << 40).to_bytes(8, "little")  # 1 TiB

    for section in (".debug_info", ".debug_str", ".rela.debug_info", ".symtab"):
        bad = _patched(tmp_path, section, [], nobits)
        with pytest.raises(
            lo.LayoutError,
            match=rf"bad.o: section {section} claims 1,099,511,627,776 bytes but "
            r"holds none in the file \(SHT_NOBITS\): a damaged file, or one "
            r"whose debug information was moved to a separate file",
        ):
            lo.Layout.from_dwarf(bad, "struct p")

    def huge(data, header, section):
        data[header + 32 : header + 40] = (1 << 40).to_bytes(8, "little")

    bad = _patched(tmp_path, ".rela.debug_info", [], huge)  # relocating the DWARF reads it too
    with pytest.raises(
        lo.LayoutError,
        match=r"bad.o: section .rela.debug_info runs past the end of the file "
        r"\(1,099,511,627,776 bytes at offset",
    ):
        lo.Layout.from_dwarf(bad, "struct p")


@needs_cc
def test_a_compressed_debug_section_that_claims_gigabytes_is_refused_before_it_is_inflated(tmp_path):
    def bomb(data, header, section):
        assert section["sh_flags"] & 0x800
        start = section["sh_offset"]
        data[start + 8 : start + 16] = (4 << 30).to_bytes(8, "little")  # Elf64_Chdr.ch_size: 4 GiB

    bad = _patched(tmp_path, ".debug_info", ["-gz=zlib"], bomb, members=200)
    with pytest.raises(
        lo.LayoutError,
        match=r"bad.o: its DWARF sections decompress to more than layouts reads "
        r"\([\d,]+ bytes so far; section .debug_info alone 4,294,967,296 bytes "
        r"from [\d,]+ in the file; the limit is 256 MiB: 256 MiB, or 64 times "
        r"the file's [\d,]+ bytes\): a damaged file or a compression bomb; "
        r"rebuild it with -g \(uncompressed: -gz=none\)",
    ):
        lo.Layout.from_dwarf(bad, "struct p")
    assert lo.Layout.from_dwarf(tmp_path / "p.o", "struct p").itemsize == 808  # as built: read


VARIANTS = [
    (
        ["-gsplit-dwarf"],
        r"v.o was built with -gsplit-dwarf: its types are in the separate file '.*v.dwo', which "
        r"layouts does not read; rebuild it without -gsplit-dwarf",
    ),
    (
        ["-gdwarf-4", "-fdebug-types-section"],
        r"v.o was built with -fdebug-types-section \(DWARF 4 type units, "
        r"\.debug_types\), which layouts does not read; rebuild it without",
    ),
    (
        ["-gdwarf-5", "-fdebug-types-section"],
        r"v.o was built with -fdebug-types-section \(DWARF 5 type units\), "
        r"which pyelftools cannot read; rebuild it without",
    ),
    (
        ["-gz=zlib-gnu"],
        r"v.o has its DWARF compressed the old GNU way \(.zdebug_\* sections: -gz=zlib-gnu, or "
        r"--compress-debug-sections=zlib-gnu\), which pyelftools cannot read; rebuild it with "
        r"-gz=zlib or -gz=none, or run `objcopy --decompress-debug-sections .*v.o`",
    ),
    (
        ["-flto"],
        r"v.o is a GCC LTO object \(-flto\): its code and debug information are written when it is linked; "
        r"pass the linked program or library, or rebuild the object without -flto",
    ),
]


@needs_cc
@pytest.mark.parametrize("flags, message", VARIANTS, ids=[" ".join(f) for f, _ in VARIANTS])
def test_dwarf_variants_pyelftools_cannot_read_are_named_with_the_fix(tmp_path, flags, message):
    # were "defines: none", "pyelftools can read (expected 4, found 0); pass one built with -g"
    # or "has no DWARF debug information; rebuild it with -g"
    (tmp_path / "v.c").write_text(
        "struct v { char c; double d; int a[3]; };\nstruct v gv;\n"
        + " ".join(f"int f{i}(int x) {{ return x + {i}; }}" for i in range(40))
    )  # enough DWARF for -gz to compress
    built = subprocess.run(
        [CC, "-g", *flags, "-c", "-o", str(tmp_path / "v.o"), str(tmp_path / "v.c")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    if built.returncode != 0:
        pytest.skip(f"the compiler here does not take {flags}: {built.stderr[:80]}")
    if flags == ["-gz=zlib-gnu"] and b".zdebug" not in (tmp_path / "v.o").read_bytes():
        pytest.skip("the assembler here wrote no .zdebug sections")
    with pytest.raises(lo.LayoutError, match=message):
        lo.Layout.from_dwarf(tmp_path / "v.o", "struct v")
