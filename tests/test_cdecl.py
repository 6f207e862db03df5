"""Layout.from_c against the machine's C compiler: offsets, sizes, bit-fields, round trips."""

import re
import struct

import numpy as np
import pyarrow as pa
import pytest
from cprobe import CC, compiler_facts, layout_facts, run_c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import layouts as lo

needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine")

TICK_H = """
#include <stdint.h>
#define NSYM 8
enum side { BUY = 1, SELL = 2, SIDE_ALIAS = 2 };
enum { NQ = 2 };
typedef uint32_t u32;
struct quote { double px; int32_t qty; };   /* a nested struct */
typedef struct tick {
    int64_t ts;
    char sym[NSYM];
    struct quote q[NQ];
    enum side side;
    u32 a:3, b:5;
    signed int s:4;
    _Bool flag:1;
    union { float f; int32_t i; } u;
    union { int64_t big; uint8_t raw[8]; };
    unsigned short arr[2][NSYM / 4 + 1];
} tick_t;
"""

DECLARATIONS = {
    "tick_t": TICK_H,
    "struct p1": "#pragma pack(push, 1)\nstruct p1 { char c; double d; short s; unsigned a:3; unsigned b:5;"
    " unsigned short f:3, g:13; };\n#pragma pack(pop)\n",
    "struct p2": "#pragma pack(2)\nstruct p2 { char c; double d; struct { char x; int y; } in; };\n#pragma pack()\n",
    "struct pa": "struct pa { char c; int x; unsigned a:3; unsigned b:5; char z; unsigned char v:4, h:4; }"
    " __attribute__((packed));",
    "struct al": "struct al { char c; int x __attribute__((aligned(16))); char e;"
    " struct { char q; } __attribute__((aligned(8))) in; };",
    "struct pm": "struct pm { char c; int x __attribute__((packed)); char e; short s; };",
    "struct bf": "struct bf { char c; unsigned a:3; int :0; unsigned long long b:40; short s:9; unsigned :5;"
    " signed char t:2; long long u:64; };",
    "struct sa": "typedef struct __attribute__((aligned(32))) { double d; } big_t;\nstruct sa { char c; big_t b[2]; };",
    "struct en": "enum __attribute__((packed)) small { A, B = 200 }; enum neg { N = -5, P = 5 };\n"
    "struct en { enum small s; enum neg n; char c; enum small arr[3]; };",
    "union un": "union un { char c[3]; double d; struct { short a, b; } s; };",
    "struct ty": "#include <stddef.h>\ntypedef unsigned long ul; typedef ul ul2; typedef ul2 arr_t[3];\n"
    "struct ty { long l; unsigned long long ull; ul2 x; arr_t y; float f; _Bool b; wchar_t w;"
    " signed char sc; unsigned char uc; short sh; unsigned short us; long double *no; };",
}


@needs_cc
@pytest.mark.parametrize("compiler", ["auto", None])
@pytest.mark.parametrize("name", sorted(DECLARATIONS))
def test_offsets_sizes_and_bit_fields_match_the_compiler(name, compiler):
    options = {"pointers": "int"} if name == "struct ty" else {}
    layout = lo.Layout.from_c(DECLARATIONS[name], name, compiler=compiler, **options)
    assert compiler_facts(DECLARATIONS[name], name, layout) == layout_facts(layout)


@needs_cc
@pytest.mark.parametrize(
    "header,name,options",
    [
        ("netinet/ip.h", "struct iphdr", {}),
        ("netinet/ip.h", "struct ip", {}),
        ("netinet/tcp.h", "struct tcphdr", {}),
        ("time.h", "struct tm", {"pointers": "int"}),
    ],
)
def test_system_headers_match_the_compiler(header, name, options):
    path = f"/usr/include/{header}"
    layout = lo.Layout.from_c(path, name, **options)
    assert compiler_facts(f"#include <{header}>\n", name, layout) == layout_facts(layout)


# ------------------------------------------------------------ random declarations

_SCALARS = [
    "char",
    "signed char",
    "unsigned char",
    "short",
    "unsigned short",
    "int",
    "unsigned int",
    "long",
    "unsigned long",
    "long long",
    "float",
    "double",
    "_Bool",
    "int8_t",
    "uint16_t",
    "int32_t",
    "uint64_t",
]
_BITS = {
    "unsigned char": 8,
    "short": 16,
    "unsigned short": 16,
    "int": 32,
    "unsigned int": 32,
    "long long": 64,
    "unsigned long long": 64,
    "_Bool": 1,
}


@st.composite
def c_members(draw, depth=0, names=None):
    """A list of member declarations, possibly with nested structs and unions."""
    out, names = [], names if names is not None else iter(range(10**6))
    for _ in range(draw(st.integers(1, 6))):
        name = f"m{next(names)}"
        choice = draw(st.integers(0, 9 if depth < 2 else 6))
        if choice <= 3:
            dims = "".join(f"[{d}]" for d in draw(st.lists(st.integers(1, 3), max_size=2 if choice == 0 else 0)))
            attr = draw(st.sampled_from(["", "", "", " __attribute__((aligned(8)))", " __attribute__((packed))"]))
            out.append(f"{draw(st.sampled_from(_SCALARS))} {name}{dims}{attr};")
        elif choice <= 6:
            ctype = draw(st.sampled_from(sorted(_BITS)))
            width = draw(st.integers(1, _BITS[ctype]))
            out.append(f"{ctype} {name} : {width};")
            if draw(st.booleans()):
                out.append(f"{ctype} : {draw(st.integers(0, min(_BITS[ctype], 7)))};")
        elif choice == 7:
            out.append(f"char {name}[{draw(st.integers(1, 9))}];")
        else:
            kind = draw(st.sampled_from(["struct", "union"]))
            inner = " ".join(draw(c_members(depth + 1, names)))
            attr = draw(st.sampled_from(["", " __attribute__((packed))"]))
            anonymous = draw(st.booleans())
            out.append(f"{kind} {{ {inner} }}{attr}{'' if anonymous else ' ' + name};")
    return out


@st.composite
def c_records(draw):
    members = " ".join(draw(c_members()))
    wrap = draw(st.sampled_from(["plain", "packed", "pragma1", "pragma2", "pragma4", "aligned"]))
    body = f"struct r {{ {members} }}"
    if wrap == "packed":
        return f"#include <stdint.h>\n{body} __attribute__((packed));\n"
    if wrap == "aligned":
        return f"#include <stdint.h>\n{body} __attribute__((aligned(16)));\n"
    if wrap.startswith("pragma"):
        return f"#include <stdint.h>\n#pragma pack(push, {wrap[-1]})\n{body};\n#pragma pack(pop)\n"
    return f"#include <stdint.h>\n{body};\n"


@pytest.mark.slow
@needs_cc
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c_records())
def test_random_declarations_match_the_compiler(source):
    # the compiler path lays out everything gcc accepts; checked against offsetof/masks
    try:
        layout = lo.Layout.from_c(source, "struct r")
    except lo.LayoutError as err:  # the one limit of the kernels: a bit-field read through one 8-byte word
        assert re.search(r"spans \d+ bytes; layouts reads bit-fields through one 8-byte word at most", str(err)), err
        return
    if layout.fields:
        assert compiler_facts(source, "struct r", layout) == layout_facts(layout)
    # the built-in path: the same Layout, or one of its documented limits
    try:
        fallback = lo.Layout.from_c(source, "struct r", compiler=None)
    except lo.LayoutError as err:
        # The documented limits (packed bit-fields that straddle the previous field's
        # storage unit; packed records mixing bit-fields and aligned members, or with a
        # ':0' bit-field; bit-fields under #pragma pack(n > 1)) must say so, never guess.
        assert re.search(
            r"straddles the storage unit|mixes bit-fields with aligned\(\)|"
            r"bit-fields under #pragma pack|zero-width bit-field",
            str(err),
        ), err
        return
    assert fallback == layout


# ------------------------------------------------------------------ round trips

_WRITER = (
    TICK_H
    + r"""
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "wb");
    for (int i = 0; i < 1000; i++) {
        tick_t t;
        memset(&t, 0, sizeof t);
        t.ts = 1700000000000LL + i * 1000LL;
        snprintf(t.sym, sizeof t.sym, "S%d", i % 97);
        t.q[0].px = i * 0.25; t.q[0].qty = -i; t.q[1].px = -i * 0.5; t.q[1].qty = i * 3;
        t.side = (i % 3 == 2) ? (enum side)7 : (i % 2 ? BUY : SELL);
        t.a = i % 8; t.b = (i * 7) % 32; t.s = (i % 16) - 8; t.flag = i % 5 == 0;
        t.u.i = i * 11;
        t.big = -1000000007LL * i;
        for (int r = 0; r < 2; r++) for (int c = 0; c < 3; c++) t.arr[r][c] = i + 10 * r + c;
        fwrite(&t, sizeof t, 1, f);
        printf("%lld %s %g %d %g %d %d %u %u %d %d %d %lld %d\n", (long long)t.ts, t.sym, t.q[0].px,
               t.q[0].qty, t.q[1].px, t.q[1].qty, (int)t.side, t.a, t.b, t.s, (int)t.flag, t.u.i,
               (long long)t.big, t.arr[1][2]);
    }
    fclose(f);
    return 0;
}
"""
)


@needs_cc
def test_records_written_by_a_c_program_convert_value_for_value(tmp_path):
    path = tmp_path / "ticks.bin"
    printed = [line.split() for line in run_c(_WRITER, str(path)).splitlines()]
    layout = lo.Layout.from_c(TICK_H, "tick_t", unions={"u": "i", "big": "big"}, bytes_as="string")
    aos = lo.AoS(path.read_bytes(), layout)
    table = aos.to_soa().to_arrow()
    rows = table.to_pylist()
    assert len(rows) == 1000
    for p, r in zip(printed, rows):
        assert r["ts"] == int(p[0]) and r["sym"] == p[1]
        assert [q["px"] for q in r["q"]] == [float(p[2]), float(p[4])]
        assert [q["qty"] for q in r["q"]] == [int(p[3]), int(p[5])]
        assert r["side"] == {1: "BUY", 2: "SELL"}.get(int(p[6]), p[6])
        assert (r["a"], r["b"], r["s"], r["flag"]) == (int(p[7]), int(p[8]), int(p[9]), p[10] == "1")
        assert r["u"] == {"i": int(p[11])} and r["big"] == int(p[12]) and r["arr"][1][2] == int(p[13])
    assert table.schema.field("side").type == pa.dictionary(pa.int32(), pa.string())
    assert table.column("side").chunk(0).dictionary.to_pylist() == ["BUY", "SELL", "7"]
    # and back: the very bytes the C program wrote
    back = lo.SoA.from_arrow(table, layout).to_aos()
    assert back.array.tobytes() == path.read_bytes()


def test_bit_fields_round_trip_and_reject_values_that_do_not_fit():
    layout = lo.Layout.from_c("struct f { unsigned a:3; int s:5; unsigned long long w:50; _Bool b:1; };")
    table = pa.table(
        {
            "a": pa.array([0, 7, 5], pa.uint32()),
            "s": pa.array([-16, 15, -1], pa.int32()),
            "w": pa.array([2**50 - 1, 0, 12345], pa.uint64()),
            "b": [True, False, True],
        }
    )
    aos = lo.SoA.from_arrow(table, layout).to_aos()
    assert aos.to_soa().to_arrow().equals(table.cast(layout.schema))
    bad = table.set_column(0, "a", pa.array([0, 8, 5], pa.uint32()))
    with pytest.raises(lo.ConversionError, match=r"column 'a', row 1: 8 does not fit the 3-bit field 'a'"):
        lo.SoA.from_arrow(bad, layout).to_aos()
    bad = table.set_column(1, "s", pa.array([-17, 0, 0], pa.int32()))
    with pytest.raises(lo.ConversionError, match=r"row 0: -17 does not fit the 5-bit field 's' \(-16\.\.15\)"):
        lo.SoA.from_arrow(bad, layout).to_aos()


@pytest.mark.parametrize("byteorder", ["little", "big"])
def test_bit_field_words_of_odd_width_at_the_end_of_a_record(byteorder):
    # 6-byte records: the word holding the 33-bit field (bytes 1-5) cannot be 8 bytes wide.
    layout = lo.Layout.from_c("struct r { char c; long long m : 33; } __attribute__((packed));", byteorder=byteorder)
    assert layout.itemsize == 6 and layout["m"].width == 5 and layout["m"].offset == 1
    table = pa.table({"c": pa.array([1, -2, 3], pa.int8()), "m": pa.array([-(2**32), 2**32 - 1, 77], pa.int64())})
    aos = lo.SoA.from_arrow(table, layout).to_aos()
    assert aos.to_soa().to_arrow().equals(table)
    word = int.from_bytes(aos.array.tobytes()[7:12], byteorder)
    assert (word >> (7 if byteorder == "big" else 0)) & (2**33 - 1) == 2**32 - 1


def test_big_endian_records_and_bit_fields():
    # An IPv4 header as it is on the wire: version 4, IHL 5; flags DF, fragment offset 0,
    # then MF with fragment offset 5. Big-endian machines declare the nibble fields
    # version first (as <netinet/ip.h> does under __BIG_ENDIAN).
    src = (
        "struct h { unsigned char version:4, ihl:4; unsigned char tos; unsigned short len;"
        " unsigned short flags:3, frag:13; };"
    )
    layout = lo.Layout.from_c(src, byteorder="big")
    wire = bytes([0x45, 0, 0x01, 0x2C, 0x40, 0x00]) + bytes([0x46, 0, 0x00, 0x14, 0x20, 0x05])
    table = lo.AoS(wire, layout).to_soa().to_arrow()
    assert table.to_pydict() == {
        "version": [4, 4],
        "ihl": [5, 6],
        "tos": [0, 0],
        "len": [300, 20],
        "flags": [2, 1],
        "frag": [0, 5],
    }
    assert lo.SoA.from_arrow(table, layout).to_aos().array.tobytes() == wire


def test_native_ip_header_from_the_system_header():
    layout = lo.Layout.from_c("/usr/include/netinet/ip.h", "struct iphdr", byteorder="native")
    wire = bytes([0x45, 0x10, 0x00, 0x54, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    row = lo.AoS(wire, layout).to_soa().to_arrow().to_pylist()[0]
    assert (row["version"], row["ihl"], row["ttl"], row["protocol"]) == (4, 5, 64, 6)
    # Multi-byte fields are in network order on the wire: native reads them swapped.
    assert row["tot_len"] == struct.unpack("=H", wire[2:4])[0]


def test_enums_as_dictionary_or_int_and_unknown_values_stay_visible():
    src = "enum color { RED, GREEN = 5, BLUE = -3 }; struct p { enum color c; short k; };"
    layout = lo.Layout.from_c(src)
    records = np.array([(0, 1), (5, 2), (-3, 3), (42, 4), (42, 5)], dtype=[("c", "<i4"), ("k", "<i2")])
    raw = np.zeros(5, dtype=layout.dtype)
    raw["c"], raw["k"] = records["c"], records["k"]
    soa = lo.AoS(raw, layout).to_soa()
    col = soa.to_arrow().column("c").chunk(0)
    assert col.to_pylist() == ["RED", "GREEN", "BLUE", "42", "42"]
    assert col.dictionary.to_pylist() == ["BLUE", "RED", "GREEN", "42"]
    assert soa.to_aos().array.tobytes() == raw.tobytes()
    as_int = layout.replace(enum_as="int")
    assert lo.AoS(raw, as_int).to_soa().to_arrow().column("c").to_pylist() == [0, 5, -3, 42, 42]
    # names, numbers and plain strings are accepted going back; anything else is named
    table = pa.table({"c": ["GREEN", "BLUE", "7"], "k": pa.array([1, 2, 3], pa.int16())})
    assert lo.SoA.from_arrow(table, layout).to_aos().array["c"].tolist() == [5, -3, 7]
    with pytest.raises(
        lo.ConversionError, match=r"'PURPLE' is neither an enumerator of field 'c' \(BLUE, RED, GREEN\)"
    ):
        lo.SoA.from_arrow(pa.table({"c": ["PURPLE"], "k": pa.array([1], pa.int16())}), layout).to_aos()


@pytest.mark.parametrize("span", [10, 10**6])  # a dense lookup table, and a binary search
def test_enum_lookup_for_dense_and_sparse_values(span):
    src = f"enum e {{ LOW = -{span}, MID = 0, HIGH = {span} }}; struct p {{ enum e c[2]; }};"
    layout = lo.Layout.from_c(src)
    raw = np.array([[-span, span], [0, 7], [span + 1, -span]], dtype="<i4")
    soa = lo.AoS(raw.tobytes(), layout).to_soa()
    assert soa.to_arrow().column("c").to_pylist() == [["LOW", "HIGH"], ["MID", "7"], [str(span + 1), "LOW"]]
    assert soa.to_aos().array.tobytes() == raw.tobytes()


def test_nulls_in_bit_field_and_enum_columns_need_a_fill():
    layout = lo.Layout.from_c("enum color { RED, GREEN }; struct p { unsigned a:3; enum color c; };")
    table = pa.table({"a": pa.array([1, None, 3], pa.uint32()), "c": pa.array(["RED", "GREEN", None])})
    with pytest.raises(
        lo.ConversionError, match=r"column 'a' has 1 nulls \(first at row 1\).*pass fill=\{'a': value\}"
    ):
        lo.SoA.from_arrow(table, layout).to_aos()
    out = lo.SoA.from_arrow(table, layout, fill={"a": 7, "c": "GREEN"}).to_aos().to_soa().to_arrow()
    assert out.to_pydict() == {"a": [1, 7, 3], "c": ["RED", "GREEN", "GREEN"]}
    with pytest.raises(lo.ConversionError, match=r"fill\['a'\]=9 does not fit the 3-bit field 'a' \(0\.\.7\)"):
        lo.SoA.from_arrow(table, layout, fill={"a": 9, "c": 0}).to_aos()


def test_unions_give_one_column_per_member_and_writing_back_needs_a_choice():
    src = "struct v { int tag; union { float f; unsigned int bits; unsigned char b[4]; } u; };"
    layout = lo.Layout.from_c(src)
    assert layout.names == ["tag", "u.f", "u.bits", "u.b"]
    data = struct.pack("<if", 1, 1.5)
    row = lo.AoS(data, layout).to_soa().to_arrow().to_pylist()[0]
    assert row["u"] == {"f": 1.5, "bits": 0x3FC00000, "b": [0, 0, 0xC0, 0x3F]}
    with pytest.raises(lo.LayoutError, match=r"fields 'u.f' and 'u.bits' share bytes.*unions=\{'u': 'f'\}"):
        lo.AoS(data, layout).to_soa().to_aos()
    only = lo.Layout.from_c(src, unions={"u": "bits"})
    assert only.names == ["tag", "u.bits"] and only.itemsize == 8
    assert lo.AoS(data, only).to_soa().to_aos().array.tobytes() == data
    with pytest.raises(
        lo.LayoutError, match=r"unions\['u'\] names \['g'\]; the union's members are \['f', 'bits', 'b'\]"
    ):
        lo.Layout.from_c(src, unions={"u": "g"})
    with pytest.raises(lo.LayoutError, match=r"unions= names \['w'\], which are not unions of struct v"):
        lo.Layout.from_c(src, unions={"w": "f"})


def test_a_header_that_needs_a_preprocessor_on_a_machine_without_one(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(lo.LayoutError, match=r"<string>:2: #if needs a C preprocessor, and none \(cpp, gcc"):
        lo.Layout.from_c("struct a { int x; };\n#if 1\n#endif\n")
    with pytest.raises(lo.LayoutError, match=r"preprocessor=True but no C preprocessor"):
        lo.Layout.from_c("struct a { int x; };", preprocessor=True)
    assert lo.Layout.from_c("#define N 2\nstruct a { int x[N]; };").itemsize == 8


def test_pack_argument_and_mini_preprocessor_without_cpp():
    src = "/* header */\n#define N 3\n#define M (N * 2)\nstruct s { char c; double d[M]; }; // trailing"
    packed = lo.Layout.from_c(src, pack=1, preprocessor=False)
    assert packed.itemsize == 1 + 8 * 6 and packed["d"].offset == 1
    assert lo.Layout.from_c(src, preprocessor=False).itemsize == 56


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "src,name,options,message",
    [
        ("struct s { int *p; };", None, {}, r"<string>:1:16: field 'struct s.p' is a pointer: .*pass pointers='int'"),
        (
            "struct s { int n; char data[]; };",
            None,
            {},
            r"<string>:1:24: field 'struct s.data' is a flexible array member",
        ),
        (
            "struct s { long double x; };",
            None,
            {},
            r"field 'x' is long double \(16 bytes here\): no NumPy/Arrow type holds it exactly",
        ),
        ("struct s { void (*cb)(int); };", None, {}, r"field 'struct s.cb' is a pointer"),
        (
            "struct a { int x; }; struct b { int y; };",
            None,
            {},
            r"the source defines 2 structs/unions \(struct a, struct b\); pass the name",
        ),
        (
            "struct a { int x; };",
            "struct nope",
            {},
            r"no struct or union named 'struct nope' in <string>; it defines: struct a",
        ),
        ("struct a { int x;\n  int y z; };", None, {}, r"<string>:2:9: C syntax error before: z"),
        ("struct a { mytype x; };", None, {}, r"C syntax error"),
        (
            "#include <stdint.h>\nstruct a { int x; };",
            None,
            {"preprocessor": False},
            r"<string>:1: #include needs a C preprocessor, and none .* is on PATH",
        ),
        ("struct a { struct later l; };", None, {}, r"struct later is declared but never defined"),
        ("struct a { int x[N]; };", None, {}, r"the length of array 'struct a.x': cannot evaluate 'N'"),
        ("struct s { int x; };", None, {"byteorder": "middle"}, r"byteorder must be one of"),
        ("struct s { int x; };", None, {"pack": 3}, r"pack must be a power of two"),
        (
            "struct a { char c; unsigned a:3; unsigned b:30; } __attribute__((packed));",
            None,
            {},
            r"packed bit-field 'a.b' straddles the storage unit",
        ),
        ("nothing_here.h", None, {}, r"no such header file: 'nothing_here.h'"),
    ],
)
def test_bad_declarations_name_the_place_and_the_fix(src, name, options, message):
    # the built-in (pycparser/cffi) path; tests/test_c_compiler.py has the compiler's messages
    with pytest.raises(lo.LayoutError, match=message):
        lo.Layout.from_c(src, name, compiler=None, **options)


def test_pointers_as_integers():
    layout = lo.Layout.from_c("struct s { int *p; int n; };", pointers="int")
    assert layout["p"].dtype == np.dtype("u8") and layout["n"].offset == 8


# ---------------------------------------------------------------------- inspect


def test_inspect_prints_fields_holes_and_waste(tmp_path, capsys):
    from layouts._cli import main

    header = tmp_path / "tick.h"
    header.write_text(TICK_H)
    assert main(["inspect", str(header), "tick_t"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tick_t: 88 bytes per record, alignment 8, ")
    assert re.search(r"52:0\s+3 bits\s+a\s+u32 :3\s+\|u1 bits\s+uint32", out)
    assert re.search(r"28\s+4\s+\(padding\)", out) and "18 padding bytes (20.5%)" in out
    assert main(["inspect", str(header), "tick_t", "--json"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    assert d["size"] == 88 and d["padding_bytes"] == 18
    assert {"name": None, "offset": 84, "size": 4} in d["fields"]
    a = next(f for f in d["fields"] if f["name"] == "a")
    assert (a["offset"], a["bit_offset"], a["bit_size"], a["ctype"]) == (52, 0, 3, "u32 :3")
    assert main(["inspect", str(header), "--json"]) == 0  # every struct of the file
    assert [x["name"] for x in json.loads(capsys.readouterr().out)] == ["struct quote", "struct tick"]


@pytest.mark.slow
def test_inspect_bad_input_is_one_line_and_non_zero(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.h"
    bad.write_text("struct s {\n  int a;\n  int b c;\n};\n")
    run = subprocess.run(
        [sys.executable, "-m", "layouts", "inspect", str(bad), "--compiler", "none"], capture_output=True, text=True
    )
    assert run.returncode == 1 and run.stderr.strip() == f"layouts inspect: error: {bad}:3:9: C syntax error before: c"
    if CC:
        run = subprocess.run([sys.executable, "-m", "layouts", "inspect", str(bad)], capture_output=True, text=True)
        assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1
        assert run.stderr.startswith(f"layouts inspect: error: {bad}:3:9: C error: expected")
    bad.write_text("struct s { int a; };\n")
    run = subprocess.run(
        [sys.executable, "-m", "layouts", "inspect", str(bad), "struct t"], capture_output=True, text=True
    )
    assert run.returncode == 1 and "no struct or union named 'struct t'" in run.stderr
