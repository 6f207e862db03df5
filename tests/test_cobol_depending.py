"""OCCURS DEPENDING ON tables cut to their counts (layouts.cobol.cut_depending_on)."""

from pathlib import Path

import pyarrow as pa
import pytest

import layouts as lo
from layouts import cobol

DATA = Path(__file__).parent / "data" / "cobrix"
BOOK = """
       01 R.
          05 N        PIC 9.
          05 G.
             10 M     PIC 9.
             10 T     OCCURS 1 TO 3 TIMES DEPENDING ON N.
                15 A  PIC X.
                15 B  PIC 9 COMP-3.
          05 L        PIC 9 OCCURS 3 DEPENDING ON G.M.
"""


def fixed(values, size, item):
    return pa.FixedSizeListArray.from_arrays(pa.array(values, item), size)


def test_nested_and_flat_tables_are_cut_to_their_counts():
    book = cobol.read_copybook(BOOK)
    assert cobol.depending_tables(book) == [(("L",), "G.M", 3), (("G", "T"), "N", 3)]
    t_struct = pa.StructArray.from_arrays([pa.array(list("abcdef")), pa.array(range(6), pa.int64())], names=["A", "B"])
    g = pa.StructArray.from_arrays([pa.array([3, 0]), pa.FixedSizeListArray.from_arrays(t_struct, 3)], names=["M", "T"])
    table = pa.table({"N": [2, 3], "G": g, "L": fixed(range(6), 3, pa.int64())})
    out = cobol.cut_depending_on(table, book)
    assert out.to_pylist() == [
        {"N": 2, "G": {"M": 3, "T": [{"A": "a", "B": 0}, {"A": "b", "B": 1}]}, "L": [0, 1, 2]},
        {"N": 3, "G": {"M": 0, "T": [{"A": "d", "B": 3}, {"A": "e", "B": 4}, {"A": "f", "B": 5}]}, "L": []},
    ]
    flat = pa.table(
        {
            "N": [1, 0],
            "G.M": [1, 2],
            "G.T.A": fixed(list("abcdef"), 3, pa.string()),
            "G.T.B": fixed(range(6), 3, pa.int64()),
            "L": fixed(range(6), 3, pa.int64()),
        }
    )
    out = cobol.cut_depending_on(flat, book, flatten=True)
    assert out.column("G.T.A").to_pylist() == [["a"], []]
    assert out.column("L").to_pylist() == [[0], [3, 4]]


def test_counts_out_of_range_or_null_and_nested_counts_are_errors():
    book = cobol.read_copybook(BOOK)
    flat = {
        "G.M": [1, 2],
        "G.T.A": fixed(list("abcdef"), 3, pa.string()),
        "G.T.B": fixed(range(6), 3, pa.int64()),
        "L": fixed(range(6), 3, pa.int64()),
    }
    with pytest.raises(
        lo.ConversionError,
        match=r"record 1: the count N of G.T \(OCCURS DEPENDING ON\) is 4, "
        r"outside 0..3",
    ):
        cobol.cut_depending_on(pa.table({"N": [1, 4], **flat}), book, flatten=True)
    with pytest.raises(lo.ConversionError, match=r"record 0: the count N of G.T .* is null"):
        cobol.cut_depending_on(pa.table({"N": [None, 1], **flat}), book, flatten=True)
    with pytest.raises(lo.LayoutError, match=r"with flatten=True only counts outside any table are supported"):
        cobol.cut_depending_on(
            pa.table({"COUNT": [0]}), cobol.read_copybook(DATA / "test21_copybook.cob"), flatten=True
        )


def test_nested_tables_each_element_by_its_count():
    """Cobrix's test21: an OCCURS 0 TO 2 DEPENDING ON COUNT of groups, each with an OCCURS 0
    TO 3 DEPENDING ON its INNER-COUNT. The records are spread out to their maximum size
    (Cobrix reads them packed, variable_size_occurs), read, then cut."""
    from cobrix_oracle import expected, reference_rows, render, same

    book = cobol.read_copybook(DATA / "test21_copybook.cob")
    data, at, rows = (DATA / "test21_data/data.dat").read_bytes(), 0, []
    while at < len(data):
        count, record, at = data[at] - 0x30, data[at : at + 1], at + 1
        for _ in range(count):
            inner = data[at] - 0x30
            record += data[at : at + 1 + inner].ljust(4, b"9")  # garbage past each count
            at += 1 + inner
        rows += reference_rows(book, record.ljust(9, b"7"), charset="latin-1")
    inner = pa.struct(
        [("INNER-COUNT", pa.decimal128(1, 0)), ("INNER-GROUP", pa.list_(pa.struct([("FIELD", pa.string())]), 3))]
    )
    schema = pa.schema([("COUNT", pa.decimal128(1, 0)), ("GROUP", pa.list_(inner, 2))])
    table = cobol.cut_depending_on(pa.Table.from_pylist(rows, schema=schema), book)
    assert str(table.schema.field("GROUP").type).startswith(
        "list<item: struct<INNER-COUNT: decimal128(1, 0), INNER-GROUP: list<"
    )
    for a, b in zip(table.to_pylist(), expected("test21_expected/test21.txt"), strict=True):
        same({"RECORD": render(a)}, b)


def test_annotate_puts_the_copybook_facts_in_field_metadata(tmp_path):
    """88 levels, PICTURE, usage and line in the Arrow field metadata, kept by Parquet."""
    import json

    import numpy as np
    import pyarrow.parquet as pq

    text = (
        "       01 R.\n          05 STATUS PIC X.\n             88 ACTIVE VALUE 'A'.\n"
        "             88 GONE VALUES 'X' 'Z'.\n          05 G.\n             10 AMT PIC S9(3) COMP-3.\n"
    )
    book = cobol.read_copybook(text)
    layout = lo.Layout.from_copybook(text)
    table = lo.AoS(np.frombuffer(b"\xc1\x12\x3c", layout.dtype), layout).to_soa().to_arrow()
    pq.write_table(cobol.annotate(table, book), tmp_path / "a.parquet")
    schema = pq.read_schema(tmp_path / "a.parquet")
    status = schema.field("STATUS").metadata
    assert json.loads(status[b"cobol.88"]) == {"ACTIVE": ["'A'"], "GONE": ["'X'", "'Z'"]}
    assert status[b"cobol.line"] == b"2" and status[b"cobol.picture"] == b"X"
    amount = schema.field("G").type.field("AMT").metadata
    assert amount[b"cobol.usage"] == b"COMP-3" and b"layouts.encoding" in amount  # the Layout's own kept
