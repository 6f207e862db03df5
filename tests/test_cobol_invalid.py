"""invalid="null": the count per field of invalid values made null
(layouts.cobol.invalid_counts)."""

import numpy as np
import pytest

import layouts as lo
from layouts import cobol

BOOK = """
       01  R.
           05  N        PIC 9 COMP-3.
           05  AMT      PIC S9(3) COMP-3.
           05  GRP OCCURS 0 TO 3 TIMES DEPENDING ON N.
               10  Q    PIC 9(2).
           05  NAME     PIC X(2).
"""
# N=2; AMT bad sign; Q: valid, bad ('A1'), bad past the count (not counted when cut)
RECORDS = bytes.fromhex("2F") + bytes.fromhex("0129") + "12A1".encode("cp037") + b"\x40\x40" + "AB".encode("cp037")


@pytest.mark.parametrize("flatten", [False, True])
def test_counts_per_field_nested_and_flattened(flatten):
    layout = lo.Layout.from_copybook(BOOK, invalid="null", flatten=flatten)
    table = lo.AoS(np.frombuffer(RECORDS * 2, layout.dtype), layout).to_soa().to_arrow()
    assert cobol.invalid_counts(table, layout) == {"AMT": 2, "GRP.Q": 4}
    if not flatten:  # cut to the count: the third element is gone, and with it one invalid value per row
        cut = cobol.cut_depending_on(table, cobol.read_copybook(BOOK))
        assert cobol.invalid_counts(cut, layout) == {"AMT": 2, "GRP.Q": 2}


def test_fields_read_with_errors_have_no_count_and_a_missing_column_is_named():
    layout = lo.Layout.from_copybook(BOOK)
    table = lo.AoS(np.frombuffer(RECORDS[:1] + bytes.fromhex("012C") + RECORDS[3:], layout.dtype), layout)
    with pytest.raises(lo.ConversionError):
        table.to_soa()
    nulls = lo.Layout.from_copybook(BOOK, invalid="null")
    arrow = lo.AoS(np.frombuffer(RECORDS, nulls.dtype), nulls).to_soa().to_arrow()
    assert cobol.invalid_counts(arrow, layout) == {}
    with pytest.raises(lo.LayoutError, match=r"field 'AMT' is not in the table \(its columns: N, GRP, NAME\)"):
        cobol.invalid_counts(arrow.drop_columns(["AMT"]), nulls)
