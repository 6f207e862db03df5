"""Attacks on the mainframe support (issue 27): odd but legal copybooks, hostile ones,
value edges and the command's outputs. Each test here failed before its fix."""

import os
import re
import stat
import struct

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
import layouts.cobol as cobol
from layouts._cli import main

E = lo.Encoding


def _book(*lines):
    """Fixed-format copybook text: each line's code starts in column 8."""
    return "".join(" " * 7 + line + "\n" for line in lines)


# ---------------------------------------------------------------- copybooks


@pytest.mark.parametrize(
    "lines, where",
    [
        (
            ("01 R.", "   05 A PIC X.", "   05 C PIC X.", "   05 B REDEFINES A PIC X."),
            "line 4: .*B REDEFINES A, but C comes between",
        ),
        (
            ("01 R.", "   05 G1.", "      10 A PIC X(2).", "   05 G2.", "      10 C PIC X.", "   05 G3 REDEFINES G1.")
            + ("      10 B PIC X(2).",),
            "line 6: .*G3 REDEFINES G1, but G2 comes between",
        ),
    ],
)
def test_redefines_must_follow_the_item_it_redefines(lines, where):
    """B REDEFINES A with C between them overlaid B on A and C on the byte after A: a
    layout COBOL refuses (the redefinitions must follow the area directly)."""
    with pytest.raises(lo.LayoutError, match=where):
        lo.Layout.from_copybook(_book(*lines))


def test_redefines_chains_and_sets_still_read():
    book = cobol.read_copybook(
        _book("01 R.", "   05 A PIC X(4).", "   05 B REDEFINES A PIC 9(4).", "   05 C REDEFINES B PIC X(4).")
        + _book("   05 D REDEFINES A PIC X(2).", "   05 E PIC X.")
    )
    assert [(f.name, f.offset) for f in book.fields] == [("A", 0), ("B", 0), ("C", 0), ("D", 0), ("E", 4)]


@pytest.mark.parametrize("level", ["01", "77"])
def test_occurs_on_a_record_is_an_error(level):
    """``01 R OCCURS 3.`` was read as one R: COBOL allows no OCCURS at levels 01 and 77."""
    body = ("   05 A PIC X.",) if level == "01" else ()
    pic = "" if level == "01" else " PIC X"
    with pytest.raises(lo.LayoutError, match=rf"line 1: '{level} R{pic} OCCURS 3\.'.*OCCURS.*level {level}"):
        lo.Layout.from_copybook(_book(f"{level} R{pic} OCCURS 3.", *body))


@pytest.mark.parametrize(
    "pic, need",
    [("9(37)PP", 39), ("VP(31)9(8)", 39), ("S9(18)P(21) COMP", 39), ("S9(4)P(34) COMP-5", 39)],
)
def test_p_scaling_beyond_38_digits_names_the_line(pic, need):
    """The precision P scaling needs was checked by Encoding only: a message naming no
    copybook line (or, for COMP-5, none at all before Arrow)."""
    with pytest.raises(lo.LayoutError, match=rf"copybook line 2: '05 A PIC .*{need} digits.*38"):
        lo.Layout.from_copybook(_book("01 R.", f"   05 A PIC {pic}."))


def test_floating_comments_in_fixed_format():
    """``*>`` comments (IBM Enterprise COBOL 5.2+, COBOL 2002) in fixed-format lines."""
    book = cobol.read_copybook(
        _book(
            "01 R.  *> the record",
            "   05 A PIC X(2). *> a comment. 05 Z PIC X.",
            "   05 B PIC X(3) VALUE '*>'. *> not the literal",
            "*> a whole line",
        )
    )
    assert [(f.name, f.offset, f.width) for f in book.fields] == [("A", 0, 2), ("B", 2, 3)]


def test_listing_statements_are_skipped_and_copy_is_named():
    """EJECT and SKIP1-3 (IBM listing control, with or without a period) were "an entry
    starts with a level number"; COPY now says that it is not expanded."""
    book = cobol.read_copybook(_book("01 R.", "EJECT", "   05 A PIC X.", "SKIP2.", "   05 B PIC X.", "SKIP1"))
    assert [(f.name, f.offset) for f in book.fields] == [("A", 0), ("B", 1)]
    with pytest.raises(lo.LayoutError, match=r"line 2: 'COPY ACCTREC\.': a COPY statement: .*not expand"):
        lo.Layout.from_copybook(_book("01 R.", "COPY ACCTREC.", "   05 A PIC X."))


def test_a_missing_copybook_file_is_named(tmp_path, capsys):
    """A copybook path that names no file was read as copybook text: ``column 7 holds
    'o'`` for ``nope.cob``."""
    missing = tmp_path / "nope.cob"
    with pytest.raises(lo.LayoutError, match=r"nope\.cob.*no such file"):
        lo.Layout.from_copybook(str(missing))
    with pytest.raises(lo.LayoutError, match=r"is a directory"):
        lo.Layout.from_copybook(str(tmp_path))
    data = tmp_path / "d.dat"
    data.write_bytes(b"\x40")
    assert main(["convert", str(data), "--copybook", str(missing), "--to", str(tmp_path / "o.parquet")]) == 1
    assert "--copybook" in (err := capsys.readouterr().err) and "no such file" in err and "column 7" not in err
    assert main(["convert", str(data), "--copybook", str(tmp_path), "--to", str(tmp_path / "o.parquet")]) == 1
    assert "is a directory" in capsys.readouterr().err


# ---------------------------------------------------------------- OCCURS DEPENDING ON


def _odo(count_pic, count_bytes, **options):
    src = _book("01 R.", f"   05 N {count_pic}.", "   05 T PIC X OCCURS 0 TO 3 DEPENDING ON N.")
    layout = lo.Layout.from_copybook(src, **options)
    data = count_bytes + "ABC".encode("cp037")
    table = lo.AoS(np.frombuffer(data, layout.dtype), layout).to_soa().to_arrow()
    return table, cobol.read_copybook(src, **options)


@pytest.mark.parametrize(
    "pic, raw, shown",
    [
        ("PIC S9V9 COMP-3", b"\x01\x5c", "Decimal('1.5')"),
        ("COMP-2", bytes.fromhex("4118000000000000"), "1.5"),
        ("PIC X", "A".encode("cp037"), "'A'"),
    ],
)
def test_a_count_that_is_no_whole_number_is_named(pic, raw, shown):
    """A count of 1.5 or 'A' was pyarrow's ArrowInvalid from cut_depending_on."""
    table, book = _odo(pic, raw)
    with pytest.raises(lo.ConversionError, match=rf"record 0: the count N of T .* is {re.escape(shown)}, not a whole"):
        cobol.cut_depending_on(table, book)


def test_text_counts_of_digits_still_cut():
    table, book = _odo("PIC X", "2".encode("cp037"))
    assert cobol.cut_depending_on(table, book).column("T").to_pylist() == [["A", "B"]]


def test_a_count_missing_from_the_table_is_named():
    """With the count's REDEFINES alternative not kept (or a table read with other
    options than the book), get_field_index gave -1 and the last column was taken as the
    count: here the table T itself (ArrowNotImplementedError), elsewhere a wrong number."""
    src = _book(
        "01 R.",
        "   05 N PIC S9 COMP-3.",
        "   05 M REDEFINES N PIC X.",
        "   05 T PIC X OCCURS 0 TO 3 DEPENDING ON N.",
    )
    layout = lo.Layout.from_copybook(src, redefines={"N": "M"})
    table = lo.AoS(np.frombuffer(b"\x2c" + "ABC".encode("cp037"), layout.dtype), layout).to_soa().to_arrow()
    with pytest.raises(lo.LayoutError, match=r"count N .*not a column of the table.*M"):
        cobol.cut_depending_on(table, cobol.read_copybook(src))
    every = lo.Layout.from_copybook(src)
    table = lo.AoS(np.frombuffer(b"\x2c" + "ABC".encode("cp037"), every.dtype), every).to_soa().to_arrow()
    assert cobol.cut_depending_on(table, cobol.read_copybook(src)).column("T").to_pylist() == [["A", "B"]]
    with pytest.raises(lo.LayoutError, match=r"the table T .*not a column of the table"):
        cobol.cut_depending_on(table.rename_columns(["N", "M", "U"]), cobol.read_copybook(src))


# ---------------------------------------------------------------- values


def _convert(enc, width, cells):
    dtype = np.dtype([("x", f"V{width}")])
    layout = lo.Layout.from_dtype(dtype, encodings={"x": enc})
    table = lo.AoS(np.frombuffer(b"".join(cells), dtype), layout).to_soa().to_arrow()
    back = lo.SoA.from_arrow(table, layout).to_aos().array
    return table.column("x").to_pylist(), [bytes(r) for r in back.view(np.uint8).reshape(len(back), -1)]


def test_largest_ibm_long_comes_back():
    """COMP-2 ``7FFFFFFFFFFFFFFF`` (and high-values, ``FF...FF``, its negative) read as
    +-2**252, the float64 nearest to them, which the way back refused as beyond IBM's
    largest: valid data that could not be written back."""
    cells = [bytes.fromhex(h) for h in ("7FFFFFFFFFFFFFFF", "FFFFFFFFFFFFFFFF", "7F00000000000001")]
    values, back = _convert(E("hfloat"), 8, cells)
    assert values[:2] == [2.0**252, -(2.0**252)]
    assert back[:2] == cells[:2]
    assert back[2] == bytes.fromhex("7210000000000000")  # 2**-56 * 16**63 = 16**49: normalized, exact
    with pytest.raises(lo.ConversionError, match="largest is about 7.2e75"):
        lo.SoA.from_arrow(
            pa.table({"x": pa.array([2.0**252 * (1 + 2**-52)])}),
            lo.Layout.from_dtype(np.dtype([("x", "V8")]), encodings={"x": E("hfloat")}),
        ).to_aos()


# ---------------------------------------------------------------- the command


def _segments(tmp_path):
    book, data = tmp_path / "seg.cob", tmp_path / "seg.dat"
    book.write_text(_book("01 HDR.", "   05 SEG PIC X.", "   05 NAME PIC X(4).", "01 DTL.", "   05 SEG PIC X."))
    body = "HACME".encode("cp037")
    data.write_bytes(struct.pack(">HH", len(body) + 4, 0) + body + struct.pack(">HH", 5, 0) + "D".encode("cp037"))
    flags = ["--copybook", str(book), "--segment", "H=HDR", "--segment", "D=DTL", "--segment-field", "SEG"]
    return data, flags


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_segments_to_a_file_names_the_flag(tmp_path, capsys, overwrite):
    """``--to FILE`` with --segment gave ``[Errno 20] Not a directory``."""
    data, flags = _segments(tmp_path)
    target = tmp_path / "out.parquet"
    target.write_bytes(b"mine")
    assert main(["convert", str(data), *flags, "--to", str(target), *overwrite]) == 2
    err = capsys.readouterr().err
    assert "--to" in err and "a directory" in err and "Errno" not in err
    assert target.read_bytes() == b"mine"


def test_segments_output_is_whole_or_absent(tmp_path, capsys, monkeypatch):
    """A Ctrl-C (or any failure) while the tables were written left a directory with
    some tables, the last one half written; now nothing is left, and a directory that
    was there keeps its tables."""
    import pyarrow.parquet as pq

    data, flags = _segments(tmp_path)
    write_table = pq.write_table
    written = []

    def interrupted(table, where, *a, **k):
        written.append(where)
        if len(written) == 2:
            with open(where, "wb") as f:
                f.write(b"PAR1 half")
            raise KeyboardInterrupt
        return write_table(table, where, *a, **k)

    monkeypatch.setattr(pq, "write_table", interrupted)
    out = tmp_path / "segs"
    assert main(["convert", str(data), *flags, "--to", str(out)]) == 130
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["seg.cob", "seg.dat"]
    monkeypatch.setattr(pq, "write_table", write_table)
    assert main(["convert", str(data), *flags, "--to", str(out), "--quiet"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    written.clear()
    monkeypatch.setattr(pq, "write_table", interrupted)
    assert main(["convert", str(data), *flags, "--to", str(out), "--overwrite"]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.setattr(pq, "write_table", write_table)
    back = tmp_path / "back.dat"
    assert main(["convert", str(out), *flags, "--to", str(back), "--quiet"]) == 0
    assert back.read_bytes() == data.read_bytes()
    assert main(["convert", str(out), *flags, "--to", "/dev/null", "--quiet", "--overwrite"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # written to, not replaced by a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back.dat", "seg.cob", "seg.dat", "segs"]


def test_cut_tables_past_two_billion_elements_use_large_lists():
    """The cut lists' offsets were cast to int32 whatever their size: past 2**31 - 1
    elements in one column they wrapped around (a null-typed child keeps this cheap)."""
    from layouts.cobol import _list_array

    big = 2**31 + 5
    cut = _list_array(np.array([0, 3, big]), pa.nulls(big), pa.field("item", pa.null()))
    assert pa.types.is_large_list(cut.type) and cut.value_lengths().to_pylist() == [3, big - 3]
    small = _list_array(np.array([0, 3]), pa.nulls(3), pa.field("item", pa.null()))
    assert pa.types.is_list(small.type) and len(small[0]) == 3


# ---------------------------------------------------------------- read_segments / write_segments

_HDR = _book("01 HDR.", "   05 SEG PIC X.", "   05 COMPANY PIC X(6).")
_DTL = _book("01 DTL.", "   05 SEG PIC X.", "   05 AMOUNT PIC S9(5)V99 COMP-3.")


def _segment_tables():
    types = {"H": lo.Layout.from_copybook(_HDR), "D": lo.Layout.from_copybook(_DTL)}
    body = ["HACME  ".encode("cp037"), "D".encode("cp037") + bytes.fromhex("0012345C")]
    body.append("D".encode("cp037") + bytes.fromhex("0000100D"))
    data = b"".join(struct.pack(">HH", len(b) + 4, 0) + b for b in body)
    return data, types, cobol.read_segments(data, types, segment=(0, 1))


def _with(table, name, values):
    i = table.column_names.index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: {**t, "D": t["D"].drop(["_offset"])}, r"table 'D' has no column '_offset'"),
        (lambda t: {**t, "D": t["D"].drop(["_prefix"])}, r"table 'D' has no column '_prefix'"),
        (lambda t: {"H": t["H"]}, r"no table 'D'.*segment type 'D'"),
        (lambda t: {**t, "X": t["H"]}, r"'X'.*no segment type.*would be lost"),
        (lambda t: {**t, "D": _with(t["D"], "_length", [0, 5])}, r"table 'D', row 0: _length 0 .* 1 to 5"),
        (lambda t: {**t, "D": _with(t["D"], "_length", [70000, 5])}, r"table 'D', row 0: _length 70000 .* 1 to 5"),
        (lambda t: {**t, "D": _with(t["D"], "SEG", ["H", "D"])}, r"table 'D', row 0: .*segment id .*C8.*not 'D'"),
    ],
)
def test_write_segments_refuses_what_it_cannot_write(change, message):
    """Each was a KeyError, an ArrowInvalid, or silent: a table no type names left out of
    the file, a _length past the record cut to the record, a row whose segment id field
    says another segment written with this one's id."""
    data, types, tables = _segment_tables()
    assert cobol.write_segments(tables, types, segment=(0, 1)) == data
    with pytest.raises(lo.ConversionError, match=message):
        cobol.write_segments(change(tables), types, segment=(0, 1))


@pytest.mark.parametrize(
    "types, message",
    [
        ({"€": "HDR"}, r"segment id '€' has no byte in code page cp037"),
        ({"H": "not a layout"}, r"types\['H'\] must be a layouts.Layout, got str"),
    ],
)
def test_segment_types_are_checked(types, message):
    data, layouts_, _ = _segment_tables()
    types = {k: (layouts_["H"] if v == "HDR" else v) for k, v in types.items()}
    with pytest.raises(lo.LayoutError, match=message):
        cobol.read_segments(data, types, segment=(0, 1))


@pytest.mark.parametrize("framing", ["rdw", "bdw"])
def test_framing_without_segments_is_a_usage_error(tmp_path, capsys, framing):
    """``--framing rdw`` (the default's value) without --segment was ignored: the file was
    read as fixed-length records, as if the flag had not been given."""
    data, flags = _segments(tmp_path)
    out = tmp_path / "o.parquet"
    argv = ["convert", str(data), "--copybook", flags[1], "--record", "DTL", "--framing", framing, "--to", str(out)]
    assert main(argv) == 2
    assert "--framing applies to multi-segment files" in capsys.readouterr().err and not out.exists()
    assert main(["convert", str(data), *flags, "--framing", framing, "--to", str(tmp_path / "s")]) in (0, 1)


@pytest.mark.parametrize("way", ["forward", "back"])
def test_segments_see_a_swallowed_ctrl_c(tmp_path, capsys, monkeypatch, way):
    """A Ctrl-C that Numba's compiler callbacks swallow is only counted (see
    layouts._cli.interrupts); convert checks the count, --segment did not: the command
    (a child given SIGINT 1.5 s in) finished with status 0 and its whole output. Here
    read_segments counts one as if swallowed, deterministically."""
    import layouts._cli.interrupts as interrupts_module

    data, flags = _segments(tmp_path)
    out, back = tmp_path / "segs", tmp_path / "back.dat"
    if way == "back":
        assert main(["convert", str(data), *flags, "--to", str(out), "--quiet"]) == 0
    made = []
    real_init = interrupts_module.Interrupts.__init__

    def remember(self):
        real_init(self)
        made.append(self)

    monkeypatch.setattr(interrupts_module.Interrupts, "__init__", remember)
    step = cobol.read_segments if way == "forward" else cobol.write_segments

    def swallowed(*a, **k):
        made[-1].count += 1  # a SIGINT that never raised where it came
        return step(*a, **k)

    monkeypatch.setattr(cobol, step.__name__, swallowed)
    target = out if way == "forward" else back
    assert main(["convert", str(out if way == "back" else data), *flags, "--to", str(target)]) == 130
    assert not target.exists() or way == "back" and not back.exists()


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", r"not JSON"),
        ('{"kind": "packed", "digits": 5, "evil": 1}', r"unknown key.*evil"),
        ('["packed", 5]', r"a JSON object"),
        ('{"kind": "packed", "digits": 99}', r"1 to 38 digits"),
        ('{"digits": 5}', r"has no 'kind'"),
    ],
)
def test_encoding_from_json_of_damaged_metadata(text, message):
    """``Encoding.from_json`` reads a file's field metadata (``layouts.encoding``): damaged
    metadata was a JSONDecodeError or a TypeError."""
    with pytest.raises(lo.LayoutError, match=message):
        E.from_json(text)
    assert E.from_json(E("packed", 5, 2, True).to_json()) == E("packed", 5, 2, True)


def test_short_sequence_numbers_are_fixed_format():
    """Sequence numbers shorter than six digits in columns 1-6 (``10     01 R.``) made the
    copybook look free-format: "'01' is not a clause this reader supports"."""
    src = "10     01 R.\n20         05 A PIC X(4).\n30         05 B PIC 9(3).\n"
    assert [(f.name, f.offset) for f in cobol.read_copybook(src).fields] == [("A", 0), ("B", 4)]
    free = "01 R.\n  05 A PIC X(4).\n  05 B PIC 9(3).\n"
    assert [(f.name, f.offset) for f in cobol.read_copybook(free).fields] == [("A", 0), ("B", 4)]


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--count", "1"], "--count"),
        (["--offset", "4"], "--offset"),
        (["--compression", "zstd"], "--compression"),
        (["--trailing", "ignore"], "--trailing"),
        (["--segment", "D=HDR"], "--segment D"),
    ],
)
def test_segment_flags_that_would_be_ignored_are_refused(tmp_path, capsys, extra, flag):
    """With --segment, --count 1 converted every record (and --offset, --compression,
    --trailing were ignored too); a second --segment D=... replaced the first."""
    data, flags = _segments(tmp_path)
    out = tmp_path / "segs"
    assert main(["convert", str(data), *flags, *extra, "--to", str(out)]) == 2
    err = capsys.readouterr().err
    assert flag in err and "--segment" in err and not out.exists()


@pytest.mark.parametrize(
    "pic, why",
    [
        ("P9P", "not at both"),
        ("PP9(3)PP", "not at both"),
        ("SVP9P", "not at both"),
        ("P(3)9V9", "VPP9, not PP9V9"),
        ("V9P", "9PPV, not 9V9PP"),
        ("9V9PP", "9PPV, not 9V9PP"),
    ],
)
def test_p_scaling_that_cobol_refuses(pic, why):
    """``PIC P9P`` read as digits 1, scale 3; ``PIC PPP9V9`` as scale -2 (the value times
    100): pictures COBOL refuses, given a silent meaning."""
    with pytest.raises(lo.LayoutError, match=rf"line 2: .*PICTURE {re.escape(pic)}: .*{re.escape(why)}"):
        lo.Layout.from_copybook(_book("01 R.", f"   05 A PIC {pic}."))


@pytest.mark.parametrize(
    "pic, digits, scale", [("SPPP9(5)", 5, 8), ("S9(5)PPP", 5, -3), ("VPP99", 2, 4), ("99PPV", 2, -2), ("PP9", 1, 3)]
)
def test_p_scaling_that_cobol_takes(pic, digits, scale):
    field = cobol.read_copybook(_book("01 R.", f"   05 A PIC {pic}.")).fields[0]
    layout = lo.Layout.from_copybook(_book("01 R.", f"   05 A PIC {pic}."))
    assert field.width == digits and (layout.fields[0].encoding.digits, layout.fields[0].encoding.scale) == (
        digits,
        scale,
    )


def test_sync_cannot_move_a_redefining_item():
    """``C REDEFINES B ... SYNC`` with B at byte 1 put C at byte 4 (bytes 4-7, not B's 1-4):
    a record of 8 bytes where C shares no byte start with what it redefines."""
    src = _book("01 R.", "   05 A PIC X.", "   05 B PIC X(4).", "   05 C REDEFINES B PIC S9(9) COMP SYNC.")
    with pytest.raises(lo.LayoutError, match=r"line 4: .*C REDEFINES B at byte 1 .* aligns C to byte 4"):
        lo.Layout.from_copybook(src)
    aligned = _book("01 R.", "   05 A PIC X.", "   05 B PIC S9(9) COMP SYNC.", "   05 C REDEFINES B PIC X(4).")
    assert [(f.name, f.offset) for f in cobol.read_copybook(aligned).fields] == [("A", 0), ("B", 4), ("C", 4)]


def test_an_ebcdic_copybook_file_is_named(tmp_path):
    """A copybook moved from the mainframe in binary (EBCDIC) was read as UTF-8 noise:
    "column 7 holds '\\ufffd'"."""
    text = _book("01 R.", "   05 A PIC X(4).", "   05 B PIC S9(5) COMP-3.")
    path = tmp_path / "r.cpy"
    path.write_bytes(text.encode("cp037"))
    with pytest.raises(lo.LayoutError, match=r"r\.cpy' is EBCDIC text \(cp037\).*iconv"):
        lo.Layout.from_copybook(path)
    assert lo.Layout.from_copybook(path.read_bytes().decode("cp037")).itemsize == 7


_FUZZ_CHILD = r'''
import random, sys
import numpy as np
import layouts as lo
import layouts.cobol as cobol

BASE = """000100 01  REC.  *> the record
000200     05  N        PIC S9(2) COMP-3.
000300     05  A        PIC X(4) VALUE 'A.B '.
000400     05  B REDEFINES A PIC S9(7) COMP-3 SYNC.
000500     05  C REDEFINES A.
000600         10  C1   PIC 9PP.
000700         10  C2   PIC SVPP9 SIGN LEADING SEPARATE.
       EJECT
000800     05  T OCCURS 0 TO 3 DEPENDING ON N.
000900         10  T1   PIC S9(4) COMP SYNC.
001000         10  T2   COMP-2.
001100             88  Z VALUE 0.
001200     05  F        PIC X(3) VALUE 'AB
      -        'C'.
"""
rng = random.Random(int(sys.argv[1]))
laid_out = 0
pieces = ["PIC", "X", "9", "P", "V", "S", "(", ")", ".", "'", "*>", "-", "REDEFINES", "OCCURS", "SYNC",
          "DEPENDING", "ON", "COMP-3", "EJECT", "COPY", "01", "05", "77", "88", "\t", "\n", "SKIP1", "999999"]
for _ in range(int(sys.argv[2])):
    text = list(BASE)
    for _ in range(rng.randint(1, 2)):
        at = rng.randrange(len(text))
        op = rng.random()
        if op < 0.4:
            del text[at : at + rng.randint(1, 8)]
        elif op < 0.8:
            text[at:at] = list(rng.choice(pieces) + rng.choice([" ", "", "\n"]))
        else:
            text[at] = chr(rng.randrange(1, 300))
    src = "".join(text)
    try:
        layout = lo.Layout.from_copybook(src)
        book = cobol.read_copybook(src)
        records = np.zeros(2, layout.dtype)
        assert layout.itemsize >= max((f.offset + f.width for f in book.fields), default=0), src
        laid_out += 1
    except lo.LayoutError:
        pass
    except Exception as err:
        print("CRASH", type(err).__name__, err, repr(src)[:400])
        sys.exit(1)
print("ok", laid_out)
'''


@pytest.mark.parametrize("seed_", [27, 2727])
@pytest.mark.slow
def test_mutated_hostile_copybooks_give_layout_errors_only(tmp_path, seed_):
    """Copybooks with the constructs this file fixes, mutated (fixed seeds), in a child
    process: a LayoutError or a Layout whose size holds every field, never a crash."""
    import subprocess
    import sys

    script = tmp_path / "fuzz.py"
    script.write_text(_FUZZ_CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script), str(seed_), "1500"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout[-2000:] + done.stderr[-2000:]
    assert int(done.stdout.split()[1]) > 100  # mutants that still read: their layouts were checked too


@pytest.mark.parametrize("odd", ["¹", "٣"])
def test_digits_that_are_not_ascii(odd):
    """``str.isdigit`` takes '¹' (found by the fuzz above: a ValueError from int())."""
    with pytest.raises(lo.LayoutError, match="line 2"):
        lo.Layout.from_copybook(_book("01 R.", f"   {odd} A PIC X.", "   05 B PIC X."))
    with pytest.raises(lo.LayoutError, match="line 2"):
        lo.Layout.from_copybook(_book("01 R.", f"   05 A PIC X OCCURS {odd}.", "   05 B PIC X."))
    with pytest.raises(lo.LayoutError, match="line 2"):
        lo.Layout.from_copybook(_book("01 R.", f"   05 A PIC X({odd}).", "   05 B PIC X."))


def test_one_line_copybook_text_is_not_taken_for_a_path():
    book = cobol.read_copybook("01 R. 05 A PIC X(3). 05 B PIC X. *> a/b", source_format="free")
    assert [(f.name, f.offset) for f in book.fields] == [("A", 0), ("B", 3)]
