"""The synthetic ITCH 5.0 day (benchmarks/itch_day.py) and the itch50 built-in against an
independent reader: itch-book (PyPI ``itch-book``, a C++ feed handler and order book) reads
the same generated day, and every order message it reports (A, F, E, C, X, D, U, and the
P and E prints of its trade table) equals what ``read_stream(f, "itch50")`` gives, field by
field, row by row (its ``seq``, the message's ordinal in the file from 1, equals the rank of our
``_offset``)."""

import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest
from test_streams import ITCH_LENGTHS

import layouts as lo
from layouts.benchmarks import itch_day

# Message lengths (the length field not counted) from the specification's tables, typed in
# apart from the generator's and the built-in's field lists (tests/test_streams.py keeps them).
SPEC_LENGTH = ITCH_LENGTHS
ORDER_TYPES = {
    "A": "add_order",
    "F": "add_order_mpid",
    "E": "order_executed",
    "C": "order_executed_with_price",
    "X": "order_cancel",
    "D": "order_delete",
    "U": "order_replace",
}


@pytest.fixture(scope="module")
def day():
    raw = itch_day.day_bytes(3_000_000, seed=7, slice_messages=20_000)
    return raw, lo.read_stream(raw, "itch50")


def _walk(raw):
    """(offsets, types) of every message, by a plain loop over the 2-byte lengths."""
    buf = raw.tobytes()
    offsets, kinds, pos = [], [], 0
    while pos < len(buf):
        n = int.from_bytes(buf[pos : pos + 2], "big")
        offsets.append(pos)
        kinds.append(chr(buf[pos + 2]))
        pos += 2 + n
    assert pos == len(buf)
    return np.array(offsets), np.array(kinds)


def test_the_day_has_every_type_at_its_spec_length(day):
    raw, t = day
    offsets, kinds = _walk(raw)
    lengths = np.diff(np.append(offsets, raw.nbytes)) - 2
    assert set(kinds) == set(SPEC_LENGTH)
    for k, n in SPEC_LENGTH.items():
        assert set(lengths[kinds == k]) == {n}, k
    assert itch_day.LENGTH == SPEC_LENGTH
    assert sum(len(v) for k, v in t.items() if not k.startswith("_")) == len(offsets)


def test_the_day_has_a_days_mix_and_shape(day):
    raw, t = day
    _, kinds = _walk(raw)
    share = {k: float(np.mean(kinds == k)) for k in "AFDUEXPCI"}
    assert 0.40 < share["A"] + share["F"] < 0.47
    assert 0.40 < share["D"] < 0.46
    assert 0.06 < share["U"] < 0.10
    assert 0.01 < share["I"] < 0.02
    events = t["system_event"].to_arrow()
    assert [e.strip() for e in events["event_code"].to_pylist()] == list("OSQMEC")
    ts = [int(x) for x in events["timestamp"].to_numpy()]
    assert ts == sorted(ts) and ts[2] == 9.5 * 3600 * 10**9 and ts[3] == 16 * 3600 * 10**9
    stocks = t["stock_directory"].to_arrow()["stock"].to_pylist()
    assert stocks[0] == "AAPL    " and len(set(stocks)) == len(stocks)
    assert t["stock_directory"]["stock_locate"].to_numpy().tolist() == list(range(1, len(stocks) + 1))


def test_the_day_is_in_time_order_with_live_references(day):
    raw, t = day
    parts = [v.to_arrow().select(["_offset", "timestamp"]) for k, v in t.items() if not k.startswith("_")]
    ts = pa.concat_tables(parts).sort_by("_offset")["timestamp"].to_numpy().astype(np.int64)
    assert (np.diff(ts) >= 0).all() and ts[-1] < 86_400 * 10**9
    # replay the book's references and shares in stream order: every name is live, no overdraw
    rows = []
    for kind, name in ORDER_TYPES.items():
        a = t[name].to_arrow()
        for r in a.to_pylist():
            rows.append((r["_offset"], kind, r))
    live = {}
    last_ref = 0
    for _, kind, r in sorted(rows, key=lambda x: x[0]):
        if kind in "AF":
            ref = r["order_reference_number"]
            assert ref not in live and ref > last_ref
            live[ref], last_ref = r["shares"], ref
        elif kind == "U":
            assert live.pop(r["original_order_reference_number"]) > 0
            new = r["new_order_reference_number"]
            assert new not in live and new > last_ref
            live[new], last_ref = r["shares"], new
        elif kind == "D":
            live.pop(r["order_reference_number"])
        else:
            ref = r["order_reference_number"]
            qty = r["cancelled_shares"] if kind == "X" else r["executed_shares"]
            assert 0 < qty <= live[ref]
            live[ref] -= qty
            if live[ref] == 0:
                del live[ref]
    matches = np.concatenate(
        [
            t[n]["match_number"].to_numpy()
            for n in ("order_executed", "order_executed_with_price", "trade", "cross_trade")
        ]
    )
    assert len(np.unique(matches)) == len(matches) and matches.min() >= 1
    assert t["broken_trade"]["match_number"].to_numpy().max() <= matches.max()


def test_the_day_is_deterministic_and_sized():
    a = itch_day.day_bytes(400_000, seed=3, slice_messages=5_000)
    b = itch_day.day_bytes(400_000, seed=3, slice_messages=5_000)
    assert np.array_equal(a, b)
    assert abs(a.nbytes - 400_000) < 40_000
    assert not np.array_equal(a[:100_000], itch_day.day_bytes(400_000, seed=4, slice_messages=5_000)[:100_000])


def test_the_day_goes_back_byte_for_byte(day):
    raw, t = day
    assert lo.write_stream(t, "itch50") == raw.tobytes()


def test_the_command_line_writes_a_day_file(tmp_path, capsys):
    out = tmp_path / "day.itch"
    assert itch_day.main(["--size", "200KB", "--out", str(out), "--seed", "1"]) == 0
    assert out.read_bytes() == itch_day.day_bytes(200_000, seed=1).tobytes()
    assert not (tmp_path / "day.itch.part").exists()
    with pytest.raises(SystemExit):
        itch_day.main(["--size", "4XB", "--out", str(out)])
    assert "size '4XB': expected a number with an optional unit" in capsys.readouterr().err


# --------------------------------------------------------------------------- the oracle
def _itch_book(path):
    ib = pytest.importorskip("itch_book")
    day = dt.date(2019, 12, 30)
    feed = ib.open(str(path), date=day, price_type="fixed")
    batches = list(feed.batches(tables=("messages", "trades"), rows=10**9))
    assert len(batches) == 1
    # its ts_event is New York's midnight of the session (in UTC ns) plus the ITCH timestamp
    midnight = int(dt.datetime(2019, 12, 30, tzinfo=ZoneInfo("America/New_York")).timestamp()) * 10**9
    return batches[0], feed, midnight


def test_itch_book_reads_the_same_order_messages(day, tmp_path):
    raw, t = day
    path = tmp_path / "day.itch"
    path.write_bytes(raw.tobytes())
    batch, feed, midnight = _itch_book(path)
    assert feed.stats["missing_ref"] == 0 and feed.stats["clamped"] == 0 and feed.stats["rejected"] == 0
    assert feed.stats["crossed_books"] == 0
    offsets, _ = _walk(raw)  # seq: the message's ordinal in the file, from 1
    m = batch.messages
    kinds = m["type"].astype("U1")
    # the resting order of every reference, from our own tables, for E, X, D's side and price
    resting = {}
    for name in ("add_order", "add_order_mpid"):
        for r in t[name].to_arrow().to_pylist():
            resting[r["order_reference_number"]] = (r["buy_sell_indicator"], r["price"])
    for r in t["order_replace"].to_arrow().to_pylist():
        side = resting[r["original_order_reference_number"]][0]
        resting[r["new_order_reference_number"]] = (side, r["price"])
    for kind, name in ORDER_TYPES.items():
        ours = t[name].to_arrow()
        sel = kinds == kind
        assert sel.sum() == len(ours) > 0, kind
        col = {c: v[sel] for c, v in m.items()}

        def eq(theirs, field, kind=kind, ours=ours):
            np.testing.assert_array_equal(theirs, ours[field].to_numpy(), err_msg=f"{kind}.{field}")

        np.testing.assert_array_equal(offsets[col["seq"].astype(np.int64) - 1], ours["_offset"].to_numpy())
        eq(col["ts_event"] - midnight, "timestamp")
        eq(col["locate"], "stock_locate")
        if kind == "U":
            eq(col["order_id"], "new_order_reference_number")
            eq(col["old_order_id"], "original_order_reference_number")
            eq(col["price"], "price")
            eq(col["size"], "shares")
            continue
        eq(col["order_id"], "order_reference_number")
        refs = ours["order_reference_number"].to_pylist()
        if kind in "AF":
            eq(col["side"].astype("U1"), "buy_sell_indicator")
            eq(col["price"], "price")
            eq(col["size"], "shares")
            if kind == "F":
                mpids = np.array(feed.mpids, dtype=object)[col["mpid"]]
                assert list(mpids) == [a.rstrip() for a in ours["attribution"].to_pylist()]
            else:
                assert (col["mpid"] == 0).all()
            continue
        assert list(col["side"].astype("U1")) == [resting[r][0] for r in refs]
        if kind == "C":
            eq(col["price"], "execution_price")
            assert list(col["printable"]) == [p == "Y" for p in ours["printable"].to_pylist()]
        else:
            assert list(col["price"]) == [resting[r][1] for r in refs]
        if kind in "EC":
            eq(col["size"], "executed_shares")
        elif kind == "X":
            eq(col["size"], "cancelled_shares")


def test_itch_book_prints_the_same_trades(day, tmp_path):
    raw, t = day
    path = tmp_path / "day.itch"
    path.write_bytes(raw.tobytes())
    batch, _, midnight = _itch_book(path)
    tr = batch.trades
    kinds = tr["kind"].astype("U1")
    for kind, name, size in (
        ("P", "trade", "shares"),
        ("E", "order_executed", "executed_shares"),
        ("Q", "cross_trade", "shares"),
    ):
        ours = t[name].to_arrow()
        sel = kinds == kind
        assert sel.sum() == len(ours) > 0, kind
        np.testing.assert_array_equal(tr["match_number"][sel], ours["match_number"].to_numpy())
        np.testing.assert_array_equal(tr["size"][sel], ours[size].to_numpy())
        np.testing.assert_array_equal(tr["ts_event"][sel] - midnight, ours["timestamp"].to_numpy())
        np.testing.assert_array_equal(tr["locate"][sel], ours["stock_locate"].to_numpy())
        if kind == "P":
            np.testing.assert_array_equal(tr["price"][sel], ours["price"].to_numpy())
        if kind == "Q":
            np.testing.assert_array_equal(tr["price"][sel], ours["cross_price"].to_numpy())


def test_text_shorter_than_its_field_is_written_space_padded():
    """attack8: a stock symbol with its trailing spaces stripped ('AMZN') was written NUL
    padded, a stream read_stream refuses; it is written as ITCH pads Alpha fields (and as
    read_stream reads them), so stripped symbols give back the original bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from layouts.benchmarks import itch_day

    raw = itch_day.day_bytes(20_000, seed=5, slice_messages=500).tobytes()
    t = lo.read_stream(raw, "itch50")
    a = t["add_order"].to_arrow()
    stripped = a.set_column(a.schema.get_field_index("stock"), "stock", pc.utf8_rtrim_whitespace(a.column("stock")))
    assert stripped.column("stock").to_pylist()[0].strip() == stripped.column("stock").to_pylist()[0]
    assert lo.write_stream(dict(t, add_order=stripped), "itch50") == raw
    sliced = stripped.slice(1)  # (an Arrow offset: the values found through it)
    kept = {k: v for k, v in t.items() if k != "add_order"} | {"add_order": sliced}
    back = lo.read_stream(lo.write_stream(kept, "itch50"), "itch50")["add_order"].to_arrow()
    assert back.column("stock").to_pylist() == a.column("stock").to_pylist()[1:]
    long = stripped.set_column(
        stripped.schema.get_field_index("stock"), "stock", pa.array(["TOOLONGSYM"] * stripped.num_rows)
    )
    with pytest.raises(lo.ConversionError, match=r"column 'stock', row 0: 'TOOLONGSYM'"):
        lo.write_stream(dict(t, add_order=long), "itch50")
