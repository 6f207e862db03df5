"""The one-pass stream paths give what the per-type transposes give (semantics only, no timing).

read_stream converts every record type of a section in one pass over the stream, window by
window: for ITCH's framing the scan's second walk places the records as it goes
(K.place_grouped), for other tagged sections the grouped index is walked once
(K.aos_to_soa_types). Here: the tables equal those of the per-type path, a type whose text
is not plain ASCII falls back to it (and its faults are reported as there), and bytes that
change between the scan's two walks send the section to the usual scan.
"""

import numpy as np
import pytest

import layouts as lo
from layouts._stream import read as R
from layouts.kernels import stream as K

SPEC = lo.Stream.builtin("itch50")


def _day(size, seed=0):
    from layouts.benchmarks.itch_day import day_bytes

    return day_bytes(size, seed, slice_messages=4_000)


def _per_type(src, monkeypatch):
    """The tables as the per-type transposes make them (no one-pass path)."""
    with monkeypatch.context() as m:
        m.setattr(K, "deferrable", lambda fr, unit: False)
        m.setattr(R, "_transpose_types", lambda *a: {})
        return lo.read_stream(src, SPEC)


def _same(a, b):
    assert list(a) == list(b)
    for name in a:
        assert a[name].to_arrow().equals(b[name].to_arrow()), name


@pytest.mark.parametrize("way", ["placed", "indexed"])
def test_one_pass_equals_the_per_type_transposes(monkeypatch, way):
    # every type of a day's mix, the section walked in parts (LANES a thread) and windows
    # small enough that each type spans many of them; "indexed": the scan places the
    # records first and K.aos_to_soa_types walks the index
    buf = _day(600_000, seed=4)
    monkeypatch.setattr(K, "SPLIT_BYTES", 0)
    expected = _per_type(buf, monkeypatch)
    calls = []
    real = K.place_grouped if way == "placed" else K.aos_to_soa_types
    if way == "indexed":
        monkeypatch.setattr(K, "deferrable", lambda fr, unit: False)

    def spy(*a, **k):
        done = real(*a, window=4096, **k)
        calls.append(done)
        return done

    monkeypatch.setattr(K, "place_grouped" if way == "placed" else "aos_to_soa_types", spy)
    got = lo.read_stream(buf, SPEC)
    assert len(calls) == 1 and sum(calls[0]) == 23  # every type converted there
    _same(got, expected)
    assert (
        got["add_order"]["_offset"].to_numpy()[:3].tolist() == expected["add_order"]["_offset"].to_numpy()[:3].tolist()
    )
    assert lo.write_stream(got, SPEC) == buf.tobytes()


def _first(tables, name, field):
    """(record offset, field's byte in the record) of a type's first record."""
    at = int(tables[name]["_offset"].to_numpy()[0])
    return at, {"stock": 2 + 24}[
        field
    ]  # (add_order's stock: after length, type, locate, tracking, time, ref, side, shares)


def test_text_that_is_not_plain_ascii_goes_the_general_way(monkeypatch):
    # a stock symbol with an é (valid UTF-8): that type is converted again by the general
    # kernels (which keep it), the other types stay converted by the one pass
    buf = _day(300_000, seed=5).copy()
    at, k = _first(lo.read_stream(buf, SPEC), "add_order", "stock")
    buf[at + k : at + k + 2] = np.frombuffer("é".encode(), np.uint8)
    got = lo.read_stream(buf, SPEC)
    _same(got, _per_type(buf, monkeypatch))
    assert got["add_order"]["stock"].to_arrow()[0].as_py().startswith("é")


def test_a_nul_in_text_is_reported_at_its_byte(monkeypatch):
    buf = _day(300_000, seed=6).copy()
    at, k = _first(lo.read_stream(buf, SPEC), "add_order", "stock")
    buf[at + k + 3] = 0
    with pytest.raises(lo.ConversionError, match=rf"byte {at + k}: text field 'stock' of a .*add_order"):
        lo.read_stream(buf, SPEC)


def test_bytes_changed_between_the_walks_send_the_section_to_the_usual_scan(monkeypatch):
    # between the count and the second walk a writer turns an add order (A, 36 bytes) into
    # an order executed with price (C, 36 bytes): the second walk finds other types than
    # counted, nothing of it is used, and the section is scanned again as it now is
    src = bytearray(_day(300_000, seed=7).tobytes())
    at = int(lo.read_stream(bytes(src), SPEC)["add_order"]["_offset"].to_numpy()[5])
    assert src[at + 2] == ord("A")
    real = K.place_grouped
    seen = []

    def writer(buf, *a, **k):
        src[at + 2] = ord("C")
        out = real(buf, *a, **k)
        seen.append(out)
        return out

    monkeypatch.setattr(K, "place_grouped", writer)
    got = lo.read_stream(src, SPEC)
    assert seen == [None]
    monkeypatch.undo()
    _same(got, lo.read_stream(bytes(src), SPEC))
    assert at in got["order_executed_with_price"]["_offset"].to_numpy().tolist()

    # and a change the usual scan refuses is reported as it reports it
    src[at + 2] = ord("A")
    monkeypatch.setattr(
        K, "place_grouped", lambda buf, *a, **k: (src.__setitem__(at + 2, ord("~")), real(buf, *a, **k))[1]
    )
    with pytest.raises(lo.ConversionError, match=rf"byte {at}"):
        lo.read_stream(src, SPEC)


@pytest.mark.parametrize("quarter", [0, 1, 2, 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_bytes_changed_in_any_lane_send_the_section_to_the_usual_scan(monkeypatch, quarter, threads):
    # the section in parts (K.LANES a thread) whose second walk goes side by side: a record
    # changed in any part's range between the walks (an add order made an order executed
    # with price, then a tag of no type) is found there, as in one walk
    monkeypatch.setattr(K, "SPLIT_BYTES", 0)
    src = bytearray(_day(400_000, seed=8).tobytes())
    starts = lo.read_stream(bytes(src), SPEC)["add_order"]["_offset"].to_numpy()
    at = int(starts[np.searchsorted(starts, len(src) * (2 * quarter + 1) // 8)])
    real = K.place_grouped
    seen = []

    def writer(tag):
        def place(buf, *a, **k):
            src[at + 2] = ord(tag)
            seen.append(real(buf, *a, window=4096, **k))
            return seen[-1]

        return place

    from layouts.kernels import threads as T

    monkeypatch.setattr(T, "default_threads", lambda: threads)
    monkeypatch.setattr(K, "place_grouped", writer("C"))
    got = lo.read_stream(src, SPEC)
    assert seen == [None]
    monkeypatch.setattr(K, "place_grouped", real)
    _same(got, lo.read_stream(bytes(src), SPEC))
    assert at in got["order_executed_with_price"]["_offset"].to_numpy().tolist()
    src[at + 2] = ord("A")
    monkeypatch.setattr(K, "place_grouped", writer("~"))
    with pytest.raises(lo.ConversionError, match=rf"byte {at}"):
        lo.read_stream(src, SPEC)


def test_walk_tables_of_other_layouts_give_the_same_index(monkeypatch):
    # the lanes read the tag table (int32) and the sizes (int64) through addresses; tables
    # of another dtype or with gaps leave the walk to the single walk, with the same index
    # (both at once: each other signature is a compile of the walk, 20 s on a fresh machine)
    from layouts._stream import frame as F

    monkeypatch.setattr(K, "SPLIT_BYTES", 0)
    buf = _day(300_000, seed=9)
    lp, tp, type_min, min_len = F.section_params(SPEC, SPEC.sections[0], "big", {}, "w")
    fr = (lp[0], lp[1], lp[2], lp[4], min_len, *tp[:3], tp[5], type_min, type_min)
    want = K.scan_grouped(buf, 0, len(buf), fr, lp[3], threads=1)
    spaced = np.repeat(type_min, 2)[::2]
    other = (*fr[:8], fr[8].astype(np.int64), spaced, spaced)
    got = K.scan_grouped(buf, 0, len(buf), other, lp[3], threads=1)
    assert (got[0] == want[0]).all() and (got[1] == want[1]).all()
