"""Copybook reader: lexer, parser, PICTURE strings and offsets (no kernels needed).

Offsets and widths are checked against Cobrix's own layout tables (``*_layout.txt``) and,
for random copybooks, against a plain reference computation written here.
"""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import layouts as lo
from layouts import LayoutError
from layouts._cobol import read_copybook

DATA = Path(__file__).parent / "data" / "cobrix"

# Binary items of more than 18 digits: IBM COBOL has none; Cobrix gives them the bytes of
# the value's bits. The test6 copybook has them, so this test rewrites them to PIC X(n)
# of Cobrix's width (the library refuses them, naming the width to use).
_WIDE_BINARY = [
    (r"PIC S?9\((19|20)\) +BINARY\.", "PIC X(9)."),
    (r"PIC S?9\(37\) +BINARY\.", "PIC X(16)."),
    (r"PIC S?9\(17\)V99 +COMP\.", "PIC X(9)."),
    (r"PIC S?9\(18\)V9\(10\) +COMP\.", "PIC X(12)."),
]


def cobrix_test6_source():
    text = (DATA / "test6_copybook.cob").read_text()
    for pattern, plain in _WIDE_BINARY:
        text = re.sub(pattern, plain, text)
    return text


def cobrix_layout(name):
    """``{name: (start, length)}`` of the leaves in a Cobrix layout table (0-based start)."""
    rows = {}
    for line in (DATA / name).read_text().splitlines()[2:]:
        m = re.match(r"\s*(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$", line)
        if m and m.group(2) not in ("FILLER", "RECORD"):
            rows[m.group(2)] = (int(m.group(4)) - 1, int(m.group(6)))
    return rows


def leaves(cb):
    return {f.path[-1].replace("-", "_"): (f.offset, f.width) for f in cb.fields}


def test_test6_offsets_equal_cobrix_layout():
    expected = cobrix_layout("test6_expected/test6_layout.txt")
    cb = read_copybook(cobrix_test6_source(), floating_point="ieee")
    assert cb.dtype.itemsize == 1493
    assert leaves(cb) == expected
    assert len(expected) == 195


def test_test19_offsets_equal_cobrix_layout():
    expected = cobrix_layout("test19_display_num_expected/test19_layout.txt")
    cb = read_copybook(DATA / "test19_display_num.cob")
    assert cb.dtype.itemsize == 80
    assert leaves(cb) == expected
    assert [f.kind for f in cb.fields] == ["zoned", "text", "text", "zoned", "zoned", "text", "edited"]


def test_test1_tree_offsets_and_depending_on():
    cb = read_copybook(DATA / "test1_copybook.cob")
    assert cb.dtype.itemsize == 2202  # the OCCURS at its maximum of 80
    got = {f.name: (f.offset, f.width, f.shape, f.depending_on, f.kind) for f in cb.fields}
    assert got["ID"] == (0, 2, (), (), "binary")
    assert got["COMPANY.COMPANY-ID-NUM"] == (12, 3, (), (), "packed")
    assert got["COMPANY.COMPANY-ID-STR"] == (12, 3, (), (), "text")  # REDEFINES: the same bytes
    assert got["METADATA.ACCOUNT.ACCOUNT-DETAIL.ACCOUNT-TYPE-X"] == (
        66,
        3,
        (80,),
        ("METADATA.NUMBER-OF-ACCTS",),
        "text",
    )
    assert cb.dtype["METADATA"]["ACCOUNT"]["ACCOUNT-DETAIL"].shape == (80,)
    assert cb.encodings["COMPANY.COMPANY-ID-NUM"] == {"kind": "packed", "digits": 5, "scale": 0, "signed": False}
    assert cb.encodings["ID"] == {"kind": "binary", "digits": 4, "scale": 0, "signed": True}


def test_test4_redefines_group_and_choice():
    cb = read_copybook(DATA / "test4_copybook.cob")
    assert cb.dtype.itemsize == 64
    assert cb.dtype.fields["CONTACTS"][1] == cb.dtype.fields["STATIC-DETAILS"][1] == 15
    one = read_copybook(DATA / "test4_copybook.cob", redefines={"STATIC-DETAILS": "CONTACTS"})
    assert "STATIC-DETAILS" not in one.dtype.names and one.dtype.itemsize == 64
    both = read_copybook(DATA / "test4_copybook.cob", redefines={"contacts": ["STATIC_DETAILS", "CONTACTS"]})
    assert set(both.dtype.names) == {"SEGMENT-ID", "COMPANY-ID", "STATIC-DETAILS", "CONTACTS"}
    inner = read_copybook(DATA / "test4_copybook.cob", redefines={"TAXPAYER-NUM": "TAXPAYER-NUM"})
    assert inner.dtype["STATIC-DETAILS"]["TAXPAYER"].names == ("TAXPAYER-TYPE", "TAXPAYER-NUM")


def test_record_offsets_and_names_option():
    cb = read_copybook(DATA / "test1a_copybook.cob", record_start_offset=2, record_end_offset=27, names="underscore")
    assert cb.dtype.itemsize == 2202
    assert cb.fields[0].name == "COMPANY.SHORT_NAME" and cb.fields[0].offset == 2


# ------------------------------------------------------------------ the lexer
def test_fixed_columns_continuation_tabs_and_free_format():
    fixed = (
        "000100 01  REC.                                                          IGNORED1\n"
        "000200*    a comment line\n"
        "000300/    a page eject\n"
        "000400     05  A  PIC X(3) VALUE 'ABC'.                                  IGNORED2\n"
        "000500     05  B  PIC X(4) VALUE 'AB                                            \n"
        "000600-    'CD'.\n"
        "000700     05  C  PIC S9(3)\n"
        "000800-           V99 COMP-3.\n"
        "\t05  D  PIC X.\n"
    )
    cb = read_copybook(fixed)
    assert [(f.name, f.offset, f.width) for f in cb.fields] == [("A", 0, 3), ("B", 3, 4), ("C", 7, 3), ("D", 10, 1)]
    assert cb.encodings["C"]["scale"] == 2
    free = "01 REC. *> a comment\n  05 A PIC X(3).\n* whole-line comment\n  05 B PIC 9(4) COMP.\n"
    cb = read_copybook(free)
    assert [(f.name, f.offset, f.width) for f in cb.fields] == [("A", 0, 3), ("B", 3, 2)]
    assert read_copybook(free, source_format="free").dtype == cb.dtype


def test_path_and_pathlike(tmp_path):
    p = tmp_path / "x.cpy"
    p.write_text("       01 R.\n          05 A PIC X(2).\n")
    assert read_copybook(p).dtype.itemsize == read_copybook(str(p)).dtype.itemsize == 2
    p.write_bytes(b"\0\1\2")
    with pytest.raises(LayoutError, match="NUL bytes: it is not copybook text"):
        read_copybook(p)


# ------------------------------------------------------------------ clauses
def one(body, **options):
    return read_copybook("       01 R.\n" + "".join(f"          {line}\n" for line in body.split("\n")), **options)


@pytest.mark.parametrize(
    "pic, usage, kind, width, enc",
    [
        ("9(4)", "COMP", "binary", 2, {"digits": 4}),
        ("S9(5)", "BINARY", "binary", 4, {"signed": True}),
        ("9(10)", "COMP-5", "binary", 8, {}),
        ("9(18)", "COMP-4", "binary", 8, {}),
        ("S9(7)V99", "COMP-3", "packed", 5, {"scale": 2}),
        ("9(2)", "PACKED-DECIMAL", "packed", 2, {}),
        ("S9(3)", "", "zoned", 3, {"sign": "trailing"}),
        ("9(5)PPP", "", "zoned", 5, {"scale": -3}),
        ("VPP9", "", "zoned", 1, {"scale": 3}),
        ("X(7)", "", "text", 7, {}),
        ("A(2)", "", "text", 2, {}),
        ("Z(4)9.99-", "", "edited", 9, {}),
        ("9(3)", "COMPUTATIONAL-3", "packed", 2, {}),
    ],
)
def test_elementary_kinds(pic, usage, kind, width, enc):
    cb = one(f"05 F PIC {pic} {usage}.")
    f = cb.fields[0]
    assert (f.kind, f.width, f.usage) == (kind, width, usage or "DISPLAY")
    assert enc.items() <= cb.encodings["F"].items()


def test_sign_clauses_floats_and_group_usage():
    cb = one(
        "05 A PIC S9(3) SIGN IS LEADING SEPARATE CHARACTER.\n05 B PIC S9(3) TRAILING SEPARATE.\n"
        "05 C PIC S9(3) SIGN LEADING.\n05 D COMP-1.\n05 E USAGE IS COMP-2.\n"
        "05 G COMP-3.\n   10 H PIC S9(3).\n   10 I PIC 9(4)."
    )
    got = {f.name: (f.offset, f.width) for f in cb.fields}
    assert got == {"A": (0, 4), "B": (4, 4), "C": (8, 3), "D": (11, 4), "E": (15, 8), "G.H": (23, 2), "G.I": (25, 3)}
    assert cb.encodings["A"]["sign"] == "leading separate" and cb.encodings["C"]["sign"] == "leading"
    assert cb.encodings["D"] == {"kind": "hfloat"}
    ieee = one("05 D COMP-1.\n05 E COMP-2.", floating_point="ieee")
    assert ieee.dtype["D"] == np.dtype(">f4") and ieee.dtype["E"] == np.dtype(">f8") and not ieee.encodings


def test_sync_slack_bytes():
    cb = one(
        "05 A PIC X.\n05 B PIC S9(8) COMP SYNC.\n05 C PIC X.\n05 D PIC S9(4) COMP SYNCHRONIZED.\n"
        "05 T OCCURS 2.\n   10 U PIC X.\n   10 V PIC S9(4) BINARY SYNC."
    )
    got = {f.name: (f.offset, f.width, f.sync) for f in cb.fields}
    assert got["B"] == (4, 4, True) and got["C"] == (8, 1, False) and got["D"] == (10, 2, True)
    assert got["T.U"] == (12, 1, False) and got["T.V"] == (14, 2, True)
    assert cb.dtype["T"].shape == (2,) and cb.dtype["T"].base.itemsize == 4 and cb.dtype.itemsize == 20


def test_88_levels_value_blank_justified_filler():
    cb = one(
        "05 STATUS PIC X VALUE 'A'.\n   88 ACTIVE VALUE 'A'.\n   88 CLOSED VALUES ARE 'C' 'X'.\n"
        "   88 RANGE VALUE 1 THRU 5.\n05 FILLER PIC X(3).\n05 N PIC 9(3) BLANK WHEN ZERO.\n"
        "05 J PIC X(4) JUSTIFIED RIGHT.\n05 PIC X(2).\n05 M PIC 9 OCCURS 3 TIMES INDEXED BY IX."
    )
    f = {f.name: f for f in cb.fields}
    assert f["STATUS"].conditions == (("ACTIVE", ("'A'",)), ("CLOSED", ("'C'", "'X'")), ("RANGE", ("1", "THRU", "5")))
    assert f["N"].kind == "edited" and f["N"].blank_when_zero and f["N"].offset == 4
    assert f["J"].justified and f["M"].offset == 13 and f["M"].shape == (3,)
    assert cb.dtype.names == ("STATUS", "N", "J", "M") and cb.dtype.itemsize == 16


def test_fillers_kept_as_bytes():
    cb = one("05 A PIC X.\n05 FILLER PIC 9(3) COMP-3.\n05 G.\n   10 FILLER PIC X(2).\n   10 B PIC X.", fillers="keep")
    assert [(f.name, f.kind, f.offset, f.width) for f in cb.fields] == [
        ("A", "text", 0, 1),
        ("FILLER-1", "bytes", 1, 2),
        ("G.FILLER-2", "bytes", 3, 2),
        ("G.B", "text", 5, 1),
    ]
    assert "FILLER-1" not in cb.encodings
    with pytest.raises(LayoutError, match="fillers must be one of"):
        one("05 A PIC X.", fillers="drop")


def test_several_records_choose_one():
    text = "       01 A.\n          05 X PIC X.\n       01 B.\n          05 Y PIC X(4).\n          05 Z PIC X.\n"
    with pytest.raises(LayoutError, match=r"describes 2 records \(A, B\); choose one with record='A'"):
        read_copybook(text)
    assert read_copybook(text, record="b").dtype.itemsize == 5
    with pytest.raises(LayoutError, match=r"record='Q': copybook has no item of that name; its groups are A, B"):
        read_copybook(text, record="Q")


@pytest.mark.parametrize(
    "body, message",
    [
        ("05 A PIC X.\n66 B RENAMES A.", r"line 3: '66 B RENAMES A.': 66-level RENAMES is not supported"),
        ("05 A PIC X FOO.", r"line 2: '05 A PIC X FOO.': 'FOO' is not a clause this reader supports"),
        ("05 A PIC Q(3).", r"PICTURE Q\(3\): 'Q' is not a PICTURE symbol"),
        ("05 A PIC 9(19) COMP.", r"binary items hold 18 at most \(IBM COBOL\); describe it as PIC X\(9\)"),
        ("05 A PIC 9(39).", r"has 39 digits; Arrow decimals hold 38 at most"),
        ("05 A PIC X.\n 10 B PIC X.", r"A has a PICTURE .* so it is an elementary item and cannot hold B"),
        ("05 A.\n  10 B PIC X.\n 07 C PIC X.", r"level 07 matches no open level"),
        ("05 A PIC X", r"the entry has no closing period"),
        ("05 A PIC X OCCURS 1 TO 3.", r"OCCURS 1 TO 3 needs DEPENDING ON"),
        ("05 A PIC X OCCURS 3 DEPENDING ON NOPE.", r"DEPENDING ON NOPE: no item of that name in record R"),
        ("05 A PIC X REDEFINES B.", r"A REDEFINES B, which is not an item before it"),
        ("05 A PIC X USAGE POINTER.", r"USAGE POINTER is not supported: a pointer is an address"),
        ("05 A PIC X COMP-3.", r"PICTURE X is alphanumeric; it cannot be USAGE COMP-3"),
        ("05 A PIC 9 COMP-1.", r"COMP-1 items take no PICTURE"),
        ("05 A.", r"R has no fields but FILLER|A has neither"),
        ("05 A PIC X.\n05 A PIC X.", r"A appears twice in group R"),
        ("05 A PIC X VALUE 'AB.", r"a literal opened with ' is never closed"),
        ("05 A PIC 9(3)V9V9.", r"V appears at most once"),
        ("05 A PIC X SIGN LEADING.", r"SIGN applies to numeric items"),
        ("05 A PIC 99 COMP SIGN LEADING.", r"SIGN applies to DISPLAY items, not USAGE COMP"),
        ("5 A PIC X.\nXX B PIC X.", r"an entry starts with a level number .* found 'XX'"),
        ("05 A PIC X.\n   88 C.", r"88-level C needs VALUE"),
        (
            "05 A OCCURS 99999999.\n  10 B PIC X(100).",
            r"OCCURS 99999999 of 100 bytes makes 9999999900 bytes; a record "
            r"holds 2147483647 at most",
        ),
    ],
)
def test_errors_name_the_line(body, message):
    with pytest.raises(LayoutError, match=message):
        one(body)


def test_option_errors():
    with pytest.raises(LayoutError, match=r"redefines names \['NOPE'\], which redefine nothing"):
        read_copybook(DATA / "test4_copybook.cob", redefines={"NOPE": "X"})
    with pytest.raises(LayoutError, match=r"are not alternatives of this REDEFINES set"):
        read_copybook(DATA / "test4_copybook.cob", redefines={"CONTACTS": "PHONE-NUMBER"})
    with pytest.raises(LayoutError, match="names must be one of"):
        read_copybook(DATA / "test4_copybook.cob", names="lower")
    with pytest.raises(LayoutError, match="record_start_offset must be a whole number of bytes >= 0, got -1"):
        read_copybook(DATA / "test4_copybook.cob", record_start_offset=-1)
    with pytest.raises(LayoutError, match="column 7 holds 'X'; in fixed format it is the indicator"):
        read_copybook("      X01 R.\n        05 A PIC X.\n", source_format="fixed")


# ------------------------------------------------------- random copybooks, a reference
_USAGES = {"": None, "COMP": "bin", "BINARY": "bin", "COMP-5": "bin", "COMP-3": "packed"}


@st.composite
def copybooks(draw):
    """``(text, expected, total)``: a random copybook (groups, OCCURS, REDEFINES, SYNC)
    and, for each leaf, ``(path, offset, width, shape)`` computed here the plain way."""
    lines, expected, counter = ["       01 REC."], [], [0]

    def name():
        counter[0] += 1
        return f"F{counter[0]}"

    def leaf_size(pic_digits, usage, kind):
        if kind == "text":
            return pic_digits
        if usage == "packed":
            return pic_digits // 2 + 1
        if usage == "bin":
            return 2 if pic_digits <= 4 else 4 if pic_digits <= 9 else 8
        return pic_digits

    def items(level, depth, base, path, shape):
        """Lays out a group's items from absolute offset ``base``: (size, max SYNC alignment)."""
        cursor, end, align = 0, 0, 1
        for _ in range(draw(st.integers(1, 4))):
            n, times = name(), draw(st.sampled_from([0, 0, 0, 1, 3]))
            occurs = f" OCCURS {times} TIMES" if times else ""
            inner_shape = shape + ((times,) if times else ())
            indent = " " * (11 + depth)
            if depth < 3 and draw(st.booleans()):
                lines.append(f"{indent}{level:02d} {n}{occurs}.")
                one, inner_align = items(level + 5, depth + 1, base + cursor, path + (n,), inner_shape)
                if times and one % inner_align:
                    one += inner_align - one % inner_align  # slack between occurrences
                align = max(align, inner_align)
                cursor += one * (times or 1)
                end = max(end, cursor)
                continue
            usage = draw(st.sampled_from(list(_USAGES)))
            if usage == "" and draw(st.booleans()):
                digits, kind = draw(st.integers(1, 30)), "text"
                pic = f"X({digits})"
            else:
                digits = draw(st.integers(1, 18))
                frac = draw(st.integers(0, digits - 1))
                sign = draw(st.sampled_from(["", "S"]))
                pic = f"{sign}9({digits - frac})" + (f"V9({frac})" if frac else "")
                kind = "num"
            width = leaf_size(digits, _USAGES[usage], kind)
            sync = _USAGES[usage] == "bin" and draw(st.booleans())
            if sync:
                cursor += (-(base + cursor)) % width  # slack bytes before it
                align = max(align, width)
            clause = " SYNC" if sync else ""
            lines.append(f"{indent}{level:02d} {n} PIC {pic} {usage}{clause}{occurs}.".replace(" .", "."))
            expected.append((".".join(path + (n,)), base + cursor, width, inner_shape))
            at = cursor
            cursor += width * (times or 1)
            end = max(end, cursor)
            if not times and draw(st.integers(0, 3)) == 0:  # an alternative over the same bytes
                r, k = name(), draw(st.integers(1, width + 3))
                lines.append(f"{indent}{level:02d} {r} REDEFINES {n} PIC X({k}).")
                expected.append((".".join(path + (r,)), base + at, k, shape))
                end = max(end, at + k)
        return end, align

    total, _ = items(5, 0, 0, (), ())
    return "\n".join(lines) + "\n", expected, total


@seed(27)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(copybooks())
@pytest.mark.slow
def test_random_copybooks_offsets_equal_reference(case):
    text, expected, total = case
    try:
        cb = read_copybook(text)
    except LayoutError as err:
        raise AssertionError(text) from err
    got = [(f.name, f.offset, f.width, f.shape) for f in cb.fields]
    assert got == expected, text + "\n" + "\n".join(map(str, got))
    assert cb.dtype.itemsize == max(total, 1)


@pytest.mark.parametrize(
    "after",
    ["           05  T PIC X.\n", "       01  REC2.\n           05  U PIC X.\n", "               88  B VALUE 'B'.\n"],
)
def test_an_88_level_without_its_period_is_an_error_not_a_swallowed_entry(after):
    """The words of the next entry are no values: a LayoutError naming them and the fix,
    never a field lost or another record merged in."""
    book = "       01  REC.\n           05  S PIC X.\n               88  A VALUE 'A'\n" + after
    with pytest.raises(lo.LayoutError, match=r"88-level A: '(T|REC2|B)' is no value .* end the 88 entry with a period"):
        lo.Layout.from_copybook(book)
    values = "       01  REC.\n           05  S PIC 99.\n               88  LOW VALUES 01 02\n                   03 THRU 05 ZERO.\n"
    assert lo.Layout.from_copybook(values).itemsize == 2  # numbers on the next line are still values
