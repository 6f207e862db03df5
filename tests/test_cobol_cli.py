"""The command with COBOL copybooks: layouts inspect x.cob, layouts convert --copybook, and
back; errors name the command's own flags."""

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from layouts._cli import main

DATA = Path(__file__).parent / "data" / "cobrix"
TEST3 = (DATA / "test3_data/TRAN2.AUG31.DATA.dat", DATA / "test3_copybook.cob")


def test_convert_to_parquet_and_back_byte_for_byte(tmp_path, capsys):
    data, book = TEST3
    out, back = tmp_path / "out.parquet", tmp_path / "back.dat"
    assert main(["convert", str(data), "--copybook", str(book), "--to", str(out), "--quiet"]) == 0
    table = pq.read_table(out)
    assert table.num_rows == 1000 and str(table.schema.field("AMOUNT").type) == "decimal128(11, 2)"
    assert table.column("COMPANY-ID").to_pylist()[0] == "0021213441"
    assert main(["convert", str(out), "--copybook", str(book), "--to", str(back), "--quiet"]) == 0
    assert back.read_bytes() == data.read_bytes()


def test_convert_options_names_trim_integers_and_invalid(tmp_path, capsys):
    data, book = DATA / "test19_display_num/data.dat", DATA / "test19_display_num.cob"
    out = tmp_path / "o.parquet"
    assert main(["convert", str(data), "--copybook", str(book), "--to", str(out)]) == 1
    err = capsys.readouterr().err
    assert "record 5 (byte 400 of the file)" in err and "bytes 40 40 40 40 40 40 40 40" in err
    assert "pass --invalid null to make such values nulls" in err
    assert (
        main(
            [
                "convert",
                str(data),
                "--copybook",
                str(book),
                "--to",
                str(out),
                "--quiet",
                "--invalid",
                "null",
                "--trim",
                "both",
                "--names",
                "underscore",
                "--as-integer",
            ]
        )
        == 0
    )
    table = pq.read_table(out)
    assert table.column("WS_NAME_ALPHABET").to_pylist()[0] == "ABISHEK"
    assert str(table.schema.field("WS_DATE_NUM").type) == "int64"
    assert table.column("WS_DATE_NUM").to_pylist()[5:] == [None, None]


def test_inspect_table_and_json(capsys):
    assert main(["inspect", str(DATA / "test1_copybook.cob")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "RECORD: 2202 bytes per record, 10 fields (test1_copybook.cob)"
    assert "12     3  COMPANY.COMPANY-ID-NUM" in out and "packed 9(5)" in out and "decimal128(5, 0)" in out
    assert "note: METADATA.ACCOUNT.ACCOUNT-DETAIL: OCCURS 80 DEPENDING ON METADATA.NUMBER-OF-ACCTS" in out
    assert main(["inspect", str(DATA / "test4_copybook.cob"), "--json", "--redefines", "STATIC-DETAILS=CONTACTS"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["record"] == "COMPANY-DETAILS" and described["size"] == 64
    assert [f["name"] for f in described["fields"]] == [
        "SEGMENT-ID",
        "COMPANY-ID",
        "CONTACTS.PHONE-NUMBER",
        "CONTACTS.CONTACT-PERSON",
    ]


def test_inspect_88_levels_and_record_choice(tmp_path, capsys):
    book = tmp_path / "two.cpy"
    book.write_text(
        "       01 A.\n          05 X PIC X.\n             88 YES VALUE 'Y'.\n"
        "       01 B.\n          05 Y PIC S9(3) COMP-3.\n"
    )
    assert main(["inspect", str(book)]) == 1
    assert "choose one with --record 'A'" in capsys.readouterr().err
    assert main(["inspect", str(book), "A"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[2:3] == ["X"])
    assert lines[row + 1] == " " * (lines[row].index(" X ") + 3) + "88 YES VALUE 'Y'"  # under its field
    assert main(["inspect", str(book), "--copybook", "--record", "B", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fields"][0]["encoding"] == "packed S9(3)"


@pytest.mark.parametrize(
    "argv, status, message",
    [  # 1: the copybook says no; 2: a wrong command line
        (["--record", "NOPE"], 1, "--record 'NOPE': test3_copybook.cob has no item of that name"),
        (["--codepage", "cp9"], 1, "--codepage: code page 'cp9' is not one layouts has tables for"),
        (["--unions", "A=B"], 2, "--unions applies to C declarations and NumPy dtypes, not to --copybook"),
        (["--byteorder", "little"], 2, "--byteorder applies to C declarations"),
        (["--redefines", "X"], 2, "--redefines 'X': give ITEM=ALTERNATIVE[,ALTERNATIVE]"),
        (["--redefines", "NOPE=X"], 1, r"--redefines names ['NOPE'], which redefine nothing"),
    ],
)
def test_copybook_errors_name_the_flags(tmp_path, capsys, argv, status, message):
    data, book = TEST3
    assert main(["convert", str(data), "--copybook", str(book), "--to", str(tmp_path / "x.parquet"), *argv]) == status
    assert message in capsys.readouterr().err


def test_copybook_flags_need_a_copybook(tmp_path, capsys):
    data, _ = TEST3
    assert (
        main(
            [
                "convert",
                str(data),
                "--dtype",
                "[('a', 'u1')]",
                "--to",
                str(tmp_path / "x.parquet"),
                "--codepage",
                "cp500",
            ]
        )
        == 2
    )
    assert "--codepage applies to COBOL copybooks; add --copybook FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # argparse: one record type only
        main(
            [
                "convert",
                str(data),
                "--dtype",
                "[('a', 'u1')]",
                "--copybook",
                str(TEST3[1]),
                "--to",
                str(tmp_path / "x.parquet"),
            ]
        )
    assert stop.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_way_back_needs_one_redefines_alternative(tmp_path, capsys):
    book, data = tmp_path / "r.cob", tmp_path / "r.dat"
    book.write_text("       01 R.\n          05 A PIC X(4).\n          05 B REDEFINES A PIC 9(4).\n")
    data.write_bytes(b"\xf1\xf2\xf3\xf4")
    out = tmp_path / "r.parquet"
    assert main(["convert", str(data), "--copybook", str(book), "--to", str(out), "--quiet"]) == 0
    assert main(["convert", str(out), "--copybook", str(book), "--to", str(tmp_path / "r2.dat")]) == 1
    err = capsys.readouterr().err
    assert "fields 'A' and 'B' share bytes of the record (REDEFINES alternatives)" in err
    assert "keep one alternative per REDEFINES set, e.g. --redefines A=A" in err
    assert (
        main(
            [
                "convert",
                str(out),
                "--copybook",
                str(book),
                "--to",
                str(tmp_path / "r2.dat"),
                "--quiet",
                "--redefines",
                "A=B",
                "--drop-extra",
                "A",
            ]
        )
        == 0
    )
    assert (tmp_path / "r2.dat").read_bytes() == data.read_bytes()


def test_multi_segment_file_to_tables_and_back(tmp_path, capsys):
    import struct

    book, data = tmp_path / "seg.cob", tmp_path / "seg.dat"
    book.write_text(
        "       01 HDR.\n          05 SEG PIC X.\n          05 NAME PIC X(4).\n"
        "       01 DTL.\n          05 SEG PIC X.\n          05 AMT PIC S9(3) COMP-3.\n"
    )

    def rdw(body):
        return struct.pack(">HH", len(body) + 4, 0) + body

    data.write_bytes(
        rdw("HACME".encode("cp037")) + rdw("D".encode("cp037") + b"\x12\x3d") + rdw("D".encode("cp037") + b"\x00\x5c")
    )
    common = ["--copybook", str(book), "--segment", "H=HDR", "--segment", "D=DTL", "--segment-field", "SEG"]
    assert main(["convert", str(data), *common, "--to", str(tmp_path / "segs")]) == 0
    assert "converted H: 1, D: 2 records" in capsys.readouterr().out
    amounts = pq.read_table(tmp_path / "segs" / "D.parquet").column("AMT").to_pylist()
    assert [str(a) for a in amounts] == ["-123", "5"]
    assert main(["convert", str(tmp_path / "segs"), *common, "--to", str(tmp_path / "back.dat"), "--quiet"]) == 0
    assert (tmp_path / "back.dat").read_bytes() == data.read_bytes()
    assert main(["convert", str(data), *common[:4], "--segment-field", "0:1", "--to", str(tmp_path / "x")]) == 1
    assert "the file is damaged, or it needs one more --segment ID=RECORD" in capsys.readouterr().err
    assert main(["convert", str(data), *common[:4], "--to", str(tmp_path / "x")]) == 2
    assert "--segment needs --segment-field NAME (or OFFSET:SIZE)" in capsys.readouterr().err
    # attack5: an id past the records' end read as a damaged RDW; SIZE 0 and an unknown RECORD in library terms
    assert main(["convert", str(data), *common[:4], "--segment-field", "99:1", "--to", str(tmp_path / "x")]) == 2
    assert (
        "--segment-field 99:1: the segment id would be bytes 99 to 99 of each record (after its RDW), but the "
        "records of --segment H=HDR are 5 bytes; give an OFFSET:SIZE within the first 5 bytes, or the id field's NAME"
    ) in capsys.readouterr().err
    assert main(["convert", str(data), *common[:4], "--segment-field", "0:0", "--to", str(tmp_path / "x")]) == 2
    assert "--segment-field 0:0: the id's SIZE is 1 to 8 bytes, got 0; give OFFSET:SIZE" in capsys.readouterr().err
    bad = ["--copybook", str(book), "--segment", "H=NOPE", "--segment-field", "SEG"]
    assert main(["convert", str(data), *bad, "--to", str(tmp_path / "x")]) == 1
    assert (
        f"--segment H=NOPE: RECORD 'NOPE': {book.name} has no item of that name; its groups are HDR, DTL"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "x").exists()
    assert (
        main(["convert", str(data), "--dtype", "[('a', 'u1')]", "--segment", "H=HDR", "--to", str(tmp_path / "x")]) == 2
    )
    assert "--segment lays records out by a copybook's records; add --copybook FILE" in capsys.readouterr().err
    assert (
        main(
            [
                "convert",
                str(data),
                "--copybook",
                str(book),
                "--record",
                "HDR",
                "--framing",
                "bdw",
                "--to",
                str(tmp_path / "x.parquet"),
            ]
        )
        == 2
    )
    assert "--framing applies to multi-segment files; add --segment ID=RECORD" in capsys.readouterr().err
    # attack5: a directory read --framing bdw, written back without it, lost its blocks without a word
    vb = tmp_path / "vb.dat"
    vb.write_bytes(struct.pack(">HH", 4 + len(data.read_bytes()), 0) + data.read_bytes())
    assert main(["convert", str(vb), *common, "--framing", "bdw", "--to", str(tmp_path / "vb"), "--quiet"]) == 0
    assert main(["convert", str(tmp_path / "vb"), *common, "--to", str(tmp_path / "vb2.dat")]) == 2
    err = capsys.readouterr().err
    assert "_blocks.parquet holds the blocks of a file read with --framing bdw, and this writes --framing rdw" in err
    assert not (tmp_path / "vb2.dat").exists()
    assert main(["convert", str(tmp_path / "vb"), *common, "--framing", "bdw", "--to", str(tmp_path / "vb2.dat")]) == 0
    assert (tmp_path / "vb2.dat").read_bytes() == vb.read_bytes()


def test_segment_file_says_its_signs_or_keeps_them(tmp_path, capsys):
    """--segment: signs the way back writes otherwise are counted per field and segment, or
    kept with --keep-signs (the file comes back byte for byte)."""
    import struct

    book, data = tmp_path / "seg.cob", tmp_path / "seg.dat"
    book.write_text(
        "       01 HDR.\n          05 SEG PIC X.\n          05 NAME PIC X(4).\n"
        "       01 DTL.\n          05 SEG PIC X.\n          05 AMT PIC S9(3) COMP-3.\n"
    )
    d = "D".encode("cp037")
    data.write_bytes(b"".join(struct.pack(">HH", len(b) + 4, 0) + b for b in (d + b"\x12\x3f", d + b"\x00\x0d")))
    common = ["--copybook", str(book), "--segment", "H=HDR", "--segment", "D=DTL", "--segment-field", "SEG"]
    assert main(["convert", str(data), *common, "--to", str(tmp_path / "plain")]) == 0
    assert "  2 values of AMT (segment D) will come back with another sign byte" in capsys.readouterr().out
    assert "_sign.AMT" not in pq.read_table(tmp_path / "plain" / "D.parquet").column_names
    assert main(["convert", str(data), *common, "--keep-signs", "--to", str(tmp_path / "kept")]) == 0
    assert "signs kept: 1 fields hold some" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "kept"), *common, "--to", str(tmp_path / "x.dat")]) == 2
    assert "_sign. columns, the signs --keep-signs kept: pass --keep-signs" in capsys.readouterr().err
    assert not (tmp_path / "x.dat").exists()
    back = tmp_path / "back.dat"
    assert main(["convert", str(tmp_path / "kept"), *common, "--keep-signs", "--to", str(back), "--quiet"]) == 0
    assert back.read_bytes() == data.read_bytes()
    # attack5: the way back over one of its own tables, --to a file name, a damaged table
    table = tmp_path / "kept" / "D.parquet"
    own = ["convert", str(tmp_path / "kept"), *common, "--keep-signs", "--to", str(table), "--overwrite"]
    assert main(own) == 2 and "one of the input's tables" in capsys.readouterr().err
    assert main(["convert", str(data), *common, "--to", str(tmp_path / "x.parquet")]) == 2
    assert "looks like a file name; give a directory" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
    table.write_bytes(b"PAR1 damaged")
    assert main(own[:-3] + ["--to", str(tmp_path / "y.dat")]) == 1
    assert f"cannot read {table} as a Parquet table" in capsys.readouterr().err


def test_variable_occurs_says_its_signs(tmp_path, capsys, monkeypatch):
    """--variable-occurs: the count per field of signs the way back writes otherwise (of the
    elements the counts hold), from a file and from standard input."""
    book, data = tmp_path / "v.cob", tmp_path / "v.dat"
    book.write_text(
        "       01 R.\n          05 N PIC 9.\n          05 T OCCURS 0 TO 3 TIMES DEPENDING ON N.\n"
        "             10 AMT PIC S9(3) COMP-3.\n"
    )
    data.write_bytes(b"\xf2\x12\x3f\x00\x0d" + b"\xf1\x45\x6c" + b"\xf0")
    argv = ["convert", str(data), "--copybook", str(book), "--variable-occurs", "--to", str(tmp_path / "v.parquet")]
    assert main(argv) == 0
    said = "  2 values of T.AMT will come back with another sign byte (the field's own) (--keep-signs keeps them"
    assert said in capsys.readouterr().out
    # attack5: a records name for the table (it wrote Parquet under it), a table on standard input
    assert main([*argv[:-1], str(tmp_path / "v.bin")]) == 2
    assert "writes a Parquet or Arrow IPC file here" in capsys.readouterr().err and not (tmp_path / "v.bin").exists()
    import io

    with io.TextIOWrapper(open(tmp_path / "v.parquet", "rb")) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["convert", "-", *argv[2:-1], str(tmp_path / "w.parquet")]) == 2
    assert "standard input holds a Parquet or Arrow file" in capsys.readouterr().err


def test_records_from_standard_input_say_their_signs_are_not_counted(tmp_path, capsys, monkeypatch):
    """A fixed-length file from standard input is read once: the command says its signs were
    not counted (a file's are), instead of saying nothing."""
    import io

    book, data = tmp_path / "f.cob", tmp_path / "f.dat"
    book.write_text("       01 R.\n          05 AMT PIC S9(3) COMP-3.\n")
    data.write_bytes(b"\x12\x3f\x12\x3c")
    with io.TextIOWrapper(open(data, "rb")) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["convert", "-", "--copybook", str(book), "--to", str(tmp_path / "o.parquet")]) == 0
    assert "signs and IBM floats not checked (the records came from standard input)" in capsys.readouterr().out
    assert main(["convert", str(data), "--copybook", str(book), "--to", str(tmp_path / "p.parquet")]) == 0
    assert "  1 value of AMT will come back with another sign byte" in capsys.readouterr().out


def test_invalid_null_prints_the_count_per_field(tmp_path, capsys):
    """--invalid null: one line per field with invalid values made null (the count, the field)."""
    data, book = DATA / "test19_display_num/data.dat", DATA / "test19_display_num.cob"
    for suffix, fmt in ((".parquet", []), (".arrow", []), (".arrows", ["--format", "arrows"])):
        out = tmp_path / f"o{suffix}"
        assert main(["convert", str(data), "--copybook", str(book), "--invalid", "null", "--to", str(out), *fmt]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1:] == [
            "  2 invalid values of WS-DATE-NUM made null",
            "  2 invalid values of WS-AMOUNT-NUMERIC made null",
            "  2 invalid values of WS-AMOUNT-FRACTION made null",
            # (its FILLER holds spaces, which come back as zeros: said too)
            "  7 records hold bytes other than zero where no field is (FILLER, a REDEFINES alternative left out, "
            "record start or end bytes): the way back writes zeros there; --fillers keep keeps FILLER's",
        ]
    out = tmp_path / "quiet.parquet"
    assert main(["convert", str(data), "--copybook", str(book), "--invalid", "null", "--to", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_ascii_rdw_segments_and_variable_occurs(tmp_path, capsys):
    """Cobrix's ASCII cases through the command: test4 (--codepage ascii, little-endian
    RDWs, two segments), test21 (--variable-occurs) and test25 (--occurs-mapping), each
    back byte for byte."""
    t4 = next((DATA / "test4_data").iterdir())
    seg = ["--copybook", str(DATA / "test4_copybook.cob"), "--codepage", "ascii", "--trunc", "bin"]
    seg += ["--segment", "C=COMPANY-DETAILS", "--segment", "P=COMPANY-DETAILS", "--segment-field", "0:1"]
    seg += ["--framing", "rdw-little", "--short", "pad", "--quiet"]
    assert main(["convert", str(t4), *seg, "--to", str(tmp_path / "t4")]) == 0
    assert pq.read_table(tmp_path / "t4" / "C.parquet").column("COMPANY-ID").to_pylist()[0] == "9377942526"
    redefines = ["--redefines", "CONTACTS=STATIC-DETAILS", "--redefines", "TAXPAYER-NUM=TAXPAYER-STR"]
    assert main(["convert", str(tmp_path / "t4"), *seg, *redefines, "--to", str(tmp_path / "t4.dat")]) == 0
    assert (tmp_path / "t4.dat").read_bytes() == t4.read_bytes()
    strict = [a for a in seg if a not in ("--trunc", "bin", "--quiet")]  # TRUNC(STD): 9(8) COMP above 10**8 invalid
    assert main(["convert", str(t4), *strict, "--invalid", "null", "--to", str(tmp_path / "t4n")]) == 0
    assert (
        "  150 invalid values of STATIC-DETAILS.TAXPAYER.TAXPAYER-NUM made null (segment C)\n"
        in capsys.readouterr().out
    )
    for case, extra in (
        ("test21", []),
        ("test25", ["--occurs-mapping", "DETAIL1=A:0,B:1", "--occurs-mapping", "DETAIL2=A:1,B:2"]),
    ):
        data, book = DATA / f"{case}_data/data.dat", DATA / f"{case}_copybook.cob"
        opts = ["--copybook", str(book), "--codepage", "ascii", "--variable-occurs", *extra, "--quiet"]
        assert main(["convert", str(data), *opts, "--to", str(tmp_path / f"{case}.parquet")]) == 0
        assert main(["convert", str(tmp_path / f"{case}.parquet"), *opts, "--to", str(tmp_path / f"{case}.dat")]) == 0
        assert (tmp_path / f"{case}.dat").read_bytes() == data.read_bytes()
    assert pq.read_table(tmp_path / "test21.parquet").column("COUNT").to_pylist()[3] == 2
    data, book = DATA / "test25_data/data.dat", DATA / "test25_copybook.cob"
    argv = ["convert", str(data), "--copybook", str(book), "--codepage", "ascii", "--variable-occurs"]
    assert main([*argv, "--to", str(tmp_path / "x.parquet")]) == 1
    assert "--occurs-mapping DETAIL1=TEXT:COUNT" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
    assert main([*argv, "--count", "1", "--to", str(tmp_path / "x.parquet")]) == 2
    assert "--count does not apply with --variable-occurs" in capsys.readouterr().err
    assert (
        main(
            ["convert", str(data), "--copybook", str(book), "--occurs-mapping", "A=B:1", "--to", str(tmp_path / "x.pq")]
        )
        == 2
    )
    assert "--occurs-mapping applies with --variable-occurs" in capsys.readouterr().err


def test_variable_occurs_usage_and_messages_in_flags(tmp_path, capsys):
    """Finding 06: a text or a table given twice to --occurs-mapping is a usage error;
    read_variable's and write_variable's advice comes in the command's flags."""
    book = tmp_path / "t.cob"
    book.write_text(
        "       01  REC.\n           05  KIND            PIC X(1).\n"
        "           05  DETAIL1 OCCURS 0 TO 3 TIMES DEPENDING ON KIND.\n               10  V           PIC 9(2).\n"
        "           05  END             PIC X(2).\n"
    )
    (tmp_path / "m.dat").write_bytes(b"AEEB11EEC1122EE")
    argv = ["convert", str(tmp_path / "m.dat"), "--copybook", str(book), "--codepage", "ascii", "--variable-occurs"]
    out = str(tmp_path / "m.parquet")
    assert main([*argv, "--occurs-mapping", "DETAIL1=A:0,A:1,B:1,C:2", "--to", out]) == 2
    assert "the text 'A' is given twice" in capsys.readouterr().err
    assert main([*argv, "--occurs-mapping", "DETAIL1=A:0", "--occurs-mapping", "DETAIL1=B:1", "--to", out]) == 2
    assert "the table DETAIL1 is given twice" in capsys.readouterr().err
    assert main([*argv, "--occurs-mapping", "DETAIL1=A:0,B:1,C:2", "--to", out, "--quiet"]) == 0
    # a count with a REDEFINES alternative on the way back: the command's --redefines
    redef = tmp_path / "r.cob"
    redef.write_text(
        "       01  R.\n           05  N   PIC 9.\n           05  NX REDEFINES N PIC X.\n"
        "           05  A OCCURS 0 TO 3 TIMES DEPENDING ON N PIC X.\n"
    )
    (tmp_path / "r.dat").write_bytes(b"1a")
    opts = ["--copybook", str(redef), "--codepage", "ascii", "--variable-occurs", "--quiet"]
    assert main(["convert", str(tmp_path / "r.dat"), *opts, "--to", str(tmp_path / "r.parquet")]) == 0
    assert main(["convert", str(tmp_path / "r.parquet"), *opts, "--to", str(tmp_path / "r2.dat")]) == 1
    err = capsys.readouterr().err
    assert "--redefines N=N" in err and "write_variable" not in err and "drop_columns" not in err
    # a bad value: --invalid null, not read_variable(...)
    (tmp_path / "z.dat").write_bytes(b"1x")
    num = tmp_path / "n.cob"
    num.write_text(
        "       01  R.\n           05  N   PIC 9.\n           05  A OCCURS 0 TO 3 TIMES DEPENDING ON N PIC 9.\n"
    )
    opts = ["--copybook", str(num), "--codepage", "ascii", "--variable-occurs", "--quiet"]
    assert main(["convert", str(tmp_path / "z.dat"), *opts, "--to", str(tmp_path / "z.parquet")]) == 1
    err = capsys.readouterr().err
    assert "pass --invalid null" in err and "read_variable" not in err, err


SIGNS_BOOK = """
       01  R.
           05  AMT      PIC S9(3) COMP-3.
           05  Z        PIC S9(3).
"""
# +12 C (the rule), +12 F, -0 D; Z: +123 C (the rule), +123 zone A, -0 zone D
SIGNS_DATA = (
    bytes.fromhex("012C") + "12".encode("cp037") + b"\xc3"
    + bytes.fromhex("012F") + "12".encode("cp037") + b"\xa3"
    + bytes.fromhex("000D") + "00".encode("cp037") + b"\xd0"
)  # fmt: skip


def test_signs_counted_and_kept(tmp_path, capsys):
    book, data = tmp_path / "r.cob", tmp_path / "d.bin"
    book.write_text(SIGNS_BOOK)
    data.write_bytes(SIGNS_DATA)
    out, back = tmp_path / "o.parquet", tmp_path / "back.bin"
    assert main(["convert", str(data), "--copybook", str(book), "--to", str(out)]) == 0
    said = capsys.readouterr().out
    assert "  2 values of AMT will come back with another sign byte (the field's own); pass --keep-signs" in said
    assert "  2 values of Z will come back with another sign byte" in said
    assert main(["convert", str(out), "--copybook", str(book), "--to", str(back), "--quiet"]) == 0
    assert back.read_bytes() != SIGNS_DATA  # the rule's signs
    kept, back2 = tmp_path / "k.arrow", tmp_path / "back2.bin"
    assert main(["convert", str(data), "--copybook", str(book), "--keep-signs", "--to", str(kept)]) == 0
    assert "signs kept: 2 fields hold some" in capsys.readouterr().out
    assert main(["convert", str(kept), "--copybook", str(book), "--keep-signs", "--to", str(back2), "--quiet"]) == 0
    assert back2.read_bytes() == SIGNS_DATA  # byte for byte
    assert main(["convert", str(kept), "--copybook", str(book), "--to", str(back2), "--overwrite"]) == 1
    assert "the _sign. columns are the signs --keep-signs kept: pass --keep-signs" in capsys.readouterr().err
    assert main(["convert", str(data), "--struct", "x.h:r", "--keep-signs", "--to", str(out), "--overwrite"]) == 2
    assert "--keep-signs applies to COBOL copybooks; add --copybook FILE" in capsys.readouterr().err
    for flags, said in (
        (["--device", "cuda"], "--keep-signs converts on the CPU (the file whole); leave out --device cuda"),
        (["--chunk", "1M"], "--chunk does not apply with --keep-signs"),
        (["--variable-occurs"], "--keep-signs applies to fixed-length records and --segment, not yet with --variable"),
    ):
        args = ["convert", str(data), "--copybook", str(book), "--keep-signs", "--to", str(kept), "--overwrite"]
        assert main(args + flags) == 2
        assert said in capsys.readouterr().err


def test_converted_files_carry_88_levels(tmp_path, capsys):
    book, data = tmp_path / "a.cob", tmp_path / "a.bin"
    book.write_text(
        "       01 A.\n          05 STATUS PIC X.\n             88 ACTIVE VALUE 'A'.\n"
        "             88 GONE VALUES 'X' 'Z'.\n          05 N PIC 9(3).\n"
    )
    data.write_bytes("A123Z004".encode("cp037"))
    for suffix in ("parquet", "arrow"):
        out = tmp_path / f"a.{suffix}"
        assert main(["convert", str(data), "--copybook", str(book), "--to", str(out), "--quiet"]) == 0
        import pyarrow.feather as feather

        schema = pq.read_schema(out) if suffix == "parquet" else feather.read_table(out).schema
        assert json.loads(schema.field("STATUS").metadata[b"cobol.88"]) == {"ACTIVE": ["'A'"], "GONE": ["'X'", "'Z'"]}
        assert b"cobol.88" not in (schema.field("N").metadata or {})
        back = tmp_path / f"back-{suffix}.bin"
        assert main(["convert", str(out), "--copybook", str(book), "--to", str(back), "--quiet"]) == 0
        assert back.read_bytes() == data.read_bytes()


def test_fill_of_a_decimal_field_is_read_as_its_arrow_type(tmp_path, capsys):
    """attack6: --fill A=0 for a COMP-3 field was read as the field's bytes (b'0') and
    refused, whatever the value, though the command's own error advised it."""
    book, data = tmp_path / "n.cob", tmp_path / "n.dat"
    book.write_text("       01 R.\n           05 A PIC S9(3) COMP-3.\n")
    data.write_bytes(bytes.fromhex("123c1a3c"))  # 123, then a bad digit nibble
    table = tmp_path / "n.parquet"
    assert (
        main(["convert", str(data), "--copybook", str(book), "--invalid", "null", "--to", str(table), "--quiet"]) == 0
    )
    back = tmp_path / "back.dat"
    assert main(["convert", str(table), "--copybook", str(book), "--to", str(back)]) == 1
    assert "pass --fill A=VALUE to write a value in their place" in capsys.readouterr().err
    for value, written in (("0", "000c"), ("0.0", "000c"), ("-999", "999d"), ("+7", "007c")):
        flags = ["--fill", f"A={value}", "--to", str(back), "--overwrite", "--quiet"]
        assert main(["convert", str(table), "--copybook", str(book), *flags]) == 0
        assert back.read_bytes().hex() == "123c" + written
    for value, said in (
        ("0.5", "expected a number of at most 3 digits, 0 of them after the point"),
        ("1000", "expected a number of at most 3 digits, 0 of them after the point"),
        ("abc", "expected a decimal number, e.g. 0 or -12.50"),
    ):
        assert main(["convert", str(table), "--copybook", str(book), "--fill", f"A={value}", "--to", str(back)]) == 2
        assert f"--fill A={value}: not a value of field 'A' (decimal128(3, 0)): {said}" in capsys.readouterr().err


@pytest.mark.slow
def test_a_reader_that_leaves_early_is_status_141_not_success(tmp_path):
    """attack6: --variable-occurs and --segment going back to --to - said they wrote every
    byte and exited 0 when standard output's reader left after 100 bytes (a pipe takes
    part of a large write and returns its count, no error): now 141, as a closed pipe."""
    import subprocess
    import sys

    book, data = tmp_path / "o.cob", tmp_path / "o.dat"
    book.write_text(
        "       01  ORDER.\n           05  N-ITEMS PIC S9(3) COMP-3.\n"
        "           05  ITEM OCCURS 0 TO 3 TIMES DEPENDING ON N-ITEMS.\n               10  QTY PIC S9(3) COMP-3.\n"
    )
    data.write_bytes(bytes.fromhex("002c005c007c") * 200_000)
    flags = ["--copybook", str(book), "--variable-occurs"]
    assert main(["convert", str(data), *flags, "--to", str(tmp_path / "o.parquet"), "--quiet"]) == 0
    reader = "import sys, os, time; sys.stdin.buffer.read(100); os.close(0); time.sleep(2)"
    command = [sys.executable, "-m", "layouts", "convert", str(tmp_path / "o.parquet"), *flags, "--to", "-"]
    writer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    subprocess.run([sys.executable, "-c", reader], stdin=writer.stdout, timeout=120)
    writer.stdout.close()
    _, err = writer.communicate(timeout=120)
    assert (writer.returncode, err) == (141, b"")


def test_variable_occurs_errors_name_the_file(tmp_path, capsys):
    """attack6: --variable-occurs errors named "the data" (the file read into memory first)."""
    book, data = tmp_path / "o.cob", tmp_path / "o.dat"
    book.write_text(
        "       01  ORDER.\n           05  N PIC S9(3) COMP-3.\n           05  ITEM PIC X OCCURS 0 TO 3 TIMES DEPENDING ON N.\n"
    )
    data.write_bytes(bytes.fromhex("001C") + b"\xc1" + bytes.fromhex("009C"))
    flags = ["--copybook", str(book), "--variable-occurs", "--to", str(tmp_path / "o.parquet")]
    assert main(["convert", str(data), *flags]) == 1
    assert f"layouts convert: error: {data}: record 1 (byte 3): the count N of ITEM" in capsys.readouterr().err
