"""Record streams: read_stream / write_stream, the built-ins against independent oracles
(dpkt for pcap, a struct encoder of the ITCH 5.0 specification), a header-driven file,
mainframe V and VB records, and the round trip byte for byte."""

import io
import struct

import numpy as np
import pyarrow as pa
import pytest

import layouts as lo
from layouts import _warmup as warmup

S = lo.Stream


# --------------------------------------------------------------------------- pcap
def _pcap_by_hand(order, nano, packets, snaplen=65535, network=1):
    """A classic pcap file written with struct (``order`` "<" or ">")."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, network)
    for sec, frac, data, orig in packets:
        out += struct.pack(order + "IIII", sec, frac, len(data), orig) + data
    return out


def _packets(rng, n, snaplen=None):
    out = []
    for i in range(n):
        size = int(rng.integers(0, 200)) if i % 5 else 0
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        orig = size
        if snaplen is not None and size > snaplen:
            data, orig = data[:snaplen], size
        out.append((1_700_000_000 + i, int(rng.integers(0, 999_999)), data, orig))
    return out


@pytest.mark.parametrize("nano", [False, True])
def test_pcap_against_dpkt_writer_and_reader(tmp_path, nano):
    dpkt = pytest.importorskip("dpkt")
    rng = np.random.default_rng(1)
    path = tmp_path / "cap.pcap"
    sent = []
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=1500, linktype=dpkt.pcap.DLT_EN10MB, nano=nano)
        for i in range(50):
            data = rng.integers(0, 256, int(rng.integers(0, 300)) if i % 7 else 0, dtype=np.uint8).tobytes()
            ts = 1_700_000_000 + i + (i * 1237 % 1_000_000) / 1e6
            w.writepkt(data, ts=ts)
            sent.append(data)
    with open(path, "rb") as f:
        expect = list(dpkt.pcap.Reader(f))
    t = lo.read_stream(path, "pcap")
    assert t.order == "little"
    pk = t["packet"].to_arrow()
    assert pk.num_rows == len(expect) == 50
    scale = 1e9 if nano else 1e6
    for row, (ts, buf), data in zip(pk.to_pylist(), expect, sent):
        assert row["_tail"] == buf == data
        assert row["incl_len"] == row["orig_len"] == len(buf)
        assert abs(row["ts_sec"] + row["ts_frac"] / scale - float(ts)) < 1e-6
    h = t["_header"].to_arrow().to_pylist()[0]
    assert h["magic"] == (0xA1B23C4D if nano else 0xA1B2C3D4)
    assert h["snaplen"] == 1500 and h["network"] == dpkt.pcap.DLT_EN10MB
    assert lo.write_stream(t, "pcap") == path.read_bytes()


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_both_byte_orders_snaplen_and_empty_packets(order, nano):
    dpkt = pytest.importorskip("dpkt")
    rng = np.random.default_rng(2)
    pkts = _packets(rng, 40, snaplen=64)
    raw = _pcap_by_hand(order, nano, pkts, snaplen=64)
    t = lo.read_stream(io.BytesIO(raw), "pcap")
    assert t.order == ("little" if order == "<" else "big")
    rows = t["packet"].to_arrow().to_pylist()
    expect = list(dpkt.pcap.Reader(io.BytesIO(raw)))
    assert len(rows) == len(expect) == 40
    for row, (_ts, buf), (sec, frac, data, orig) in zip(rows, expect, pkts):
        assert row["_tail"] == buf == data
        assert (row["ts_sec"], row["ts_frac"], row["orig_len"]) == (sec, frac, orig)
    assert any(r["orig_len"] > r["incl_len"] for r in rows)  # snaplen-truncated packets
    assert any(r["incl_len"] == 0 for r in rows)
    assert lo.write_stream(t, "pcap") == raw


def test_pcap_offsets_restore_order_and_file_object_position():
    raw = _pcap_by_hand("<", False, _packets(np.random.default_rng(3), 5))
    f = io.BytesIO(b"junk" + raw)
    f.seek(4)
    t = lo.read_stream(f, "pcap")
    offs = t["packet"]["_offset"].to_numpy()
    assert offs[0] == 24 and np.all(np.diff(offs) > 0)


def test_pcap_errors():
    raw = _pcap_by_hand("<", False, _packets(np.random.default_rng(4), 3))
    with pytest.raises(lo.ConversionError, match=r"<buffer>: byte 0: magic number .* is none of 0xa1b2c3d4"):
        lo.read_stream(b"\0" * 40, "pcap")
    with pytest.raises(lo.ConversionError, match=r"shorter than the 24-byte header of a pcap stream"):
        lo.read_stream(raw[:4] + b"\0" * 10, "pcap")
    with pytest.raises(lo.ConversionError, match=r"length field .* past the end of the data"):
        lo.read_stream(raw[:-1], "pcap")
    with pytest.raises(lo.ConversionError, match=r"byte 24: the last record is truncated: 10 bytes left"):
        lo.read_stream(raw[:34], "pcap")
    with pytest.raises(lo.LayoutError, match=r"pass order=\"big\" or \"little\""):
        lo.write_stream(dict(lo.read_stream(raw, "pcap")), "pcap")
    for order in "<>":  # a damaged length far into a capture (past the scan's read-ahead): its own byte
        packets = _packets(np.random.default_rng(5), 400)
        raw = bytearray(_pcap_by_hand(order, False, packets))
        at = 24 + sum(16 + len(p[2]) for p in packets[:300])
        struct.pack_into(order + "I", raw, at + 8, 1 << 30)
        with pytest.raises(lo.ConversionError, match=rf"byte {at}: .*length field .* past the end of the data"):
            lo.read_stream(bytes(raw), "pcap")
        assert lo.read_stream(bytes(raw[:at]), "pcap")["packet"].to_arrow().num_rows == 300


# --------------------------------------------------------------------------- ITCH 5.0
# An independent encoder: each message type's struct format and field names, written
# from the specification's tables (type byte first; 6-byte timestamps packed apart).
ITCH = {
    "S": ("system_event", "c", ["event_code"]),
    "R": (
        "stock_directory",
        "8sccIcc2scccccIc",
        [
            "stock",
            "market_category",
            "financial_status_indicator",
            "round_lot_size",
            "round_lots_only",
            "issue_classification",
            "issue_sub_type",
            "authenticity",
            "short_sale_threshold_indicator",
            "ipo_flag",
            "luld_reference_price_tier",
            "etp_flag",
            "etp_leverage_factor",
            "inverse_indicator",
        ],
    ),
    "H": ("stock_trading_action", "8scc4s", ["stock", "trading_state", "reserved", "reason"]),
    "Y": ("reg_sho_restriction", "8sc", ["stock", "reg_sho_action"]),
    "L": (
        "market_participant_position",
        "4s8sccc",
        ["mpid", "stock", "primary_market_maker", "market_maker_mode", "market_participant_state"],
    ),
    "V": ("mwcb_decline_level", "QQQ", ["level_1", "level_2", "level_3"]),
    "W": ("mwcb_status", "c", ["breached_level"]),
    "K": (
        "ipo_quoting_period_update",
        "8sIcI",
        ["stock", "ipo_quotation_release_time", "ipo_quotation_release_qualifier", "ipo_price"],
    ),
    "J": (
        "luld_auction_collar",
        "8sIIII",
        [
            "stock",
            "auction_collar_reference_price",
            "upper_auction_collar_price",
            "lower_auction_collar_price",
            "auction_collar_extension",
        ],
    ),
    "h": ("operational_halt", "8scc", ["stock", "market_code", "operational_halt_action"]),
    "A": ("add_order", "QcI8sI", ["order_reference_number", "buy_sell_indicator", "shares", "stock", "price"]),
    "F": (
        "add_order_mpid",
        "QcI8sI4s",
        ["order_reference_number", "buy_sell_indicator", "shares", "stock", "price", "attribution"],
    ),
    "E": ("order_executed", "QIQ", ["order_reference_number", "executed_shares", "match_number"]),
    "C": (
        "order_executed_with_price",
        "QIQcI",
        ["order_reference_number", "executed_shares", "match_number", "printable", "execution_price"],
    ),
    "X": ("order_cancel", "QI", ["order_reference_number", "cancelled_shares"]),
    "D": ("order_delete", "Q", ["order_reference_number"]),
    "U": (
        "order_replace",
        "QQII",
        ["original_order_reference_number", "new_order_reference_number", "shares", "price"],
    ),
    "P": (
        "trade",
        "QcI8sIQ",
        ["order_reference_number", "buy_sell_indicator", "shares", "stock", "price", "match_number"],
    ),
    "Q": ("cross_trade", "Q8sIQc", ["shares", "stock", "cross_price", "match_number", "cross_type"]),
    "B": ("broken_trade", "Q", ["match_number"]),
    "I": (
        "noii",
        "QQc8sIIIcc",
        [
            "paired_shares",
            "imbalance_shares",
            "imbalance_direction",
            "stock",
            "far_price",
            "near_price",
            "current_reference_price",
            "cross_type",
            "price_variation_indicator",
        ],
    ),
    "N": ("rpii", "8sc", ["stock", "interest_flag"]),
    "O": (
        "direct_listing_price_discovery",
        "8scIIIQII",
        [
            "stock",
            "open_eligibility_status",
            "minimum_allowable_price",
            "maximum_allowable_price",
            "near_execution_price",
            "near_execution_time",
            "lower_price_range_collar",
            "upper_price_range_collar",
        ],
    ),
}
# total message lengths in the specification's tables (type byte included)
ITCH_LENGTHS = {
    "S": 12,
    "R": 39,
    "H": 25,
    "Y": 20,
    "L": 26,
    "V": 35,
    "W": 12,
    "K": 28,
    "J": 35,
    "h": 21,
    "A": 36,
    "F": 40,
    "E": 31,
    "C": 36,
    "X": 23,
    "D": 19,
    "U": 35,
    "P": 44,
    "Q": 40,
    "B": 19,
    "I": 50,
    "N": 20,
    "O": 48,
}


def _itch_value(code, rng):
    if code == "c":
        return bytes([int(rng.integers(65, 91))])
    if code.endswith("s"):
        n = int(code[:-1])
        word = bytes(rng.integers(65, 91, int(rng.integers(1, n + 1)), dtype=np.uint8))
        return word.ljust(n, b" ")
    return int(rng.integers(0, {"I": 2**32, "Q": 2**63}[code]))


def _codes(fmt):
    import re

    return re.findall(r"\d*[a-zA-Z]", fmt)


def itch_file(rng, types, n):
    """(bytes, expected rows per type name) of ``n`` messages of ``types``."""
    out, rows = [], {ITCH[t][0]: [] for t in ITCH}
    offset = 0
    for _ in range(n):
        t = types[int(rng.integers(0, len(types)))]
        name, fmt, fields = ITCH[t]
        vals = [_itch_value(c, rng) for c in _codes(fmt)]
        loc, trk, ts = int(rng.integers(0, 2**16)), int(rng.integers(0, 2**16)), int(rng.integers(0, 86_400 * 10**9))
        body = t.encode() + struct.pack(">HH", loc, trk) + ts.to_bytes(6, "big") + struct.pack(">" + fmt, *vals)
        assert len(body) == ITCH_LENGTHS[t], t
        msg = struct.pack(">H", len(body)) + body
        row = {"_offset": offset, "message_type": t, "stock_locate": loc, "tracking_number": trk, "timestamp": ts}
        for f, v in zip(fields, vals):
            row[f] = v.decode() if isinstance(v, bytes) else v
        rows[name].append(row)
        out.append(msg)
        offset += len(msg)
    return b"".join(out), rows


def test_itch50_every_message_type_field_by_field():
    rng = np.random.default_rng(5)
    raw, rows = itch_file(rng, list(ITCH), 2000)
    t = lo.read_stream(raw, "itch50")
    for name, expect in rows.items():
        assert expect, name
        got = t[name].to_arrow().to_pylist()
        assert got == expect, name
    assert lo.write_stream(t, "itch50") == raw


def test_itch50_layouts_match_the_spec_lengths():
    stream = lo.Stream.builtin("itch50")
    (sec,) = stream.sections
    sizes = {t.tag: t.record.size("big") for t in sec.types}
    assert sizes == ITCH_LENGTHS


def test_itch50_text_decimals_and_types():
    raw, _ = itch_file(np.random.default_rng(6), ["A"], 3)
    t = lo.read_stream(raw, "itch50")
    schema = t["add_order"].to_arrow().schema
    assert schema.field("stock").type == pa.string()
    assert schema.field("timestamp").type == pa.uint64()
    assert schema.field("price").type == pa.uint32()
    assert t.decimals["add_order"] == {"price": 4}
    dec = t.decimal("add_order", "price")
    assert dec.type == pa.decimal128(38, 4)
    ints = t["add_order"]["price"].to_numpy()
    assert [int(d.scaleb(4)) for d in dec.to_pylist()] == ints.tolist()
    with pytest.raises(lo.LayoutError, match=r"add_order.shares has no implied decimals"):
        t.decimal("add_order", "shares")


def test_itch50_write_from_changed_tables():
    raw, _ = itch_file(np.random.default_rng(7), ["A", "D", "E"], 30)
    t = dict(lo.read_stream(raw, "itch50"))
    table = t["add_order"].to_arrow()
    t["add_order"] = table.set_column(
        table.column_names.index("shares"), "shares", pa.array([7] * table.num_rows, pa.uint32())
    )
    back = lo.read_stream(lo.write_stream(t, "itch50"), "itch50")
    assert back["add_order"]["shares"].to_numpy().tolist() == [7] * table.num_rows
    assert back["order_delete"].to_arrow().equals(t["order_delete"].to_arrow())
    # fewer records: the stream closes up, order kept
    t["order_delete"] = t["order_delete"].to_arrow().slice(1)
    again = lo.read_stream(lo.write_stream(t, "itch50"), "itch50")
    assert len(again["order_delete"]) == len(back["order_delete"]) - 1


ITCH_ERRORS = [
    (b"\x00\x00", r"byte 0: the record's length field \(byte 0\) says 0, a record of 2 bytes, less than the 3"),
    (b"\x00\x05AB", r"byte 0: the record's length field \(byte 0\) says 5, a record of 7 bytes, past the end"),
    (b"\x00", r"byte 0: the last record is truncated: 1 bytes left"),
    (b"\x00\x01Z", r"record type tag 90 \(b'Z'\) at byte 2 is no type of itch50 section\[0\]"),
    (b"\x00\x05Axxxx", r"byte 0: a itch50 section\[0\] type 'add_order' record of 7 bytes, shorter than the type's 38"),
]


@pytest.mark.parametrize("raw,match", ITCH_ERRORS)
def test_itch50_hostile_input(raw, match):
    good, _ = itch_file(np.random.default_rng(8), ["D"], 2)
    with pytest.raises(
        lo.ConversionError,
        match=match.replace("byte 0", f"byte {len(good)}")
        .replace("at byte 2", f"at byte {len(good) + 2}")
        .replace("(byte 0)", f"(byte {len(good)})"),
    ):
        lo.read_stream(good + raw, "itch50")


def test_itch50_longer_message_is_an_error_naming_tail():
    body = b"D" + b"\0" * 18 + b"extra"
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 0: .*'order_delete' record of 26 bytes, longer "
        r"than the type's 21 .* set tail = \"column\"",
    ):
        lo.read_stream(struct.pack(">H", len(body)) + body, "itch50")


# --------------------------------------------------------------------------- unknown tags
def _tagged(unknown):
    return S(
        [
            S.Section(
                S.Framing(length=S.Length(0, 1, "big")),
                [
                    S.RecordType("a", S.Record([("k", "S1"), ("v", ">u2")]), "a"),
                    S.RecordType("b", S.Record([("k", "S1"), ("w", "<i4")]), "b"),
                ],
                tag=S.Tag(0, 1),
                unknown=unknown,
            )
        ]
    )


def _tagged_bytes():
    return b"\x03a\x00\x07" + b"\x05b\x01\x00\x00\x00" + b"\x02zz" + b"\x03a\x00\x09"


def test_unknown_tags_skip_keep_error():
    raw = _tagged_bytes()
    with pytest.raises(lo.ConversionError, match=r"byte 10: record type tag 122 \(b'z'\) at byte 11 .* unknown = "):
        lo.read_stream(raw, _tagged("error"))
    skip = lo.read_stream(raw, _tagged("skip"))
    assert skip["a"]["v"].to_numpy().tolist() == [7, 9] and "_unknown" not in skip
    keep = lo.read_stream(raw, _tagged("keep"))
    assert keep["_unknown"].to_arrow().to_pylist() == [{"_offset": 10, "_tail": b"\x02zz"}]
    assert keep["a"]["_offset"].to_numpy().tolist() == [0, 13]
    assert lo.write_stream(keep, _tagged("keep")) == raw
    # skipped records are not written back
    assert lo.write_stream(skip, _tagged("skip")) == raw[:10] + raw[13:]


# --------------------------------------------------------------------------- header-driven files
LAS_LIKE = """
name = "points"
order = "little"

[header]
fields = [["signature", "S4"], ["header_size", "<u2"], ["offset_to_points", "<u4"], ["point_count", "<u4"],
          ["point_record_length", "<u2"]]
text = ["signature"]

[[section]]
offset = "offset_to_points"
count = "point_count"
framing = { size = "point_record_length" }
tail = "column"

[section.types.point]
fields = [["x", "<i4"], ["y", "<i4"], ["z", "<i4"], ["intensity", "<u2"]]
"""


def las_like(n, record_length=20, vlr=b"VLR-BYTES!"):
    rng = np.random.default_rng(9)
    header = struct.pack("<4sHIIH", b"LASF", 16, 16 + len(vlr), n, record_length)
    pts = []
    for _ in range(n):
        x, y, z = (int(v) for v in rng.integers(-(2**31), 2**31, 3))
        extra = bytes(rng.integers(0, 256, record_length - 14, dtype=np.uint8))
        pts.append((x, y, z, int(rng.integers(0, 2**16)), extra))
    body = b"".join(struct.pack("<iiiH", *p[:4]) + p[4] for p in pts)
    return header + vlr + body, pts


def test_header_gives_offset_count_and_record_size(tmp_path):
    spec = tmp_path / "points.toml"
    spec.write_text(LAS_LIKE)
    raw, pts = las_like(25)
    t = lo.read_stream(raw, spec)
    assert t["_header"].to_arrow().to_pylist()[0]["point_count"] == 25
    rows = t["point"].to_arrow().to_pylist()
    assert [(r["x"], r["y"], r["z"], r["intensity"], r["_tail"]) for r in rows] == pts
    assert rows[0]["_offset"] == 26
    assert t["_gaps"].to_arrow().to_pylist() == [{"_offset": 16, "_tail": b"VLR-BYTES!"}]
    out = tmp_path / "back.bin"
    lo.write_stream(t, spec, out)
    assert out.read_bytes() == raw
    with pytest.raises(lo.LayoutError, match=r"back.bin exists; pass overwrite=True"):
        lo.write_stream(t, spec, out)
    lo.write_stream(t, spec, out, overwrite=True)
    # the rules of every output: through a symlink the target is replaced and the link
    # stays; a directory is refused, never replaced
    link = tmp_path / "link.bin"
    link.symlink_to(out)
    lo.write_stream(t, spec, link, overwrite=True)
    assert link.is_symlink() and out.read_bytes() == raw
    with pytest.raises(lo.LayoutError, match=r"is a directory"):
        lo.write_stream(t, spec, tmp_path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back.bin", "link.bin", "points.toml"]


def test_header_driven_errors(tmp_path):
    spec = tmp_path / "points.toml"
    spec.write_text(LAS_LIKE)
    raw, _ = las_like(5)
    bad_offset = raw[:6] + struct.pack("<I", 10**6) + raw[10:]
    with pytest.raises(lo.ConversionError, match=r"offset = 'offset_to_points' is 1000000, outside the file"):
        lo.read_stream(bad_offset, spec)
    with pytest.raises(
        lo.ConversionError,
        match=r"count = 'point_count' is 5, more records than the 80 bytes from "
        r"byte 26 can hold; the header is damaged",
    ):
        lo.read_stream(raw[:-20], spec)
    zero = raw[:14] + struct.pack("<H", 0) + raw[16:]
    with pytest.raises(lo.ConversionError, match=r"framing.size = 'point_record_length' is 0; fixed records need"):
        lo.read_stream(zero, spec)
    short = raw[:14] + struct.pack("<H", 8) + raw[16:]
    with pytest.raises(lo.ConversionError, match=r"record of 8 bytes, shorter than the type's 14 bytes of fields"):
        lo.read_stream(short, spec)
    inside = raw[:6] + struct.pack("<I", 10) + raw[10:]
    with pytest.raises(
        lo.ConversionError,
        match=r"offset = 'offset_to_points' is 10, inside the part before it "
        r"\(which ends at byte 16\)",
    ):
        lo.read_stream(inside, spec)
    with pytest.raises(lo.ConversionError, match=r"shorter than the 16-byte header"):
        lo.read_stream(raw[:10], spec)
    t = dict(lo.read_stream(raw, spec))
    t["point"] = t["point"].to_arrow().slice(1)
    with pytest.raises(
        lo.ConversionError,
        match=r"the header's count = 'point_count' is 5, but the tables hold 4 "
        r"records; set the header field to 4",
    ):
        lo.write_stream(t, spec)


def test_header_count_of_length_framed_records():
    s = S(
        [S.Section(S.Framing(length=S.Length(0, 1, "big")), [S.RecordType("r", S.Record([("v", "u1")]))], count="n")],
        header=S.Record([("n", "u1")]),
    )
    assert lo.read_stream(b"\x02\x01\x07\x01\x08", s)["r"]["v"].to_numpy().tolist() == [7, 8]
    # records after the count are left to the next part: here none, so they are kept as _gaps
    t = lo.read_stream(b"\x01\x01\x07\x01\x08", s)
    assert t["_gaps"].to_arrow().to_pylist() == [{"_offset": 3, "_tail": b"\x01\x08"}]
    assert lo.write_stream(t, s) == b"\x01\x01\x07\x01\x08"
    with pytest.raises(
        lo.ConversionError,
        match=r"count = 'n' is 3 records, but the data ends after 2 \(byte 5\); "
        r"the file is truncated or the header damaged",
    ):
        lo.read_stream(b"\x03\x01\x07\x01\x08", s)


def test_expression_overflow_and_division_by_zero():
    hdr = S.Record([("a", "<u8"), ("b", "<u8")])
    sec = S.Section(S.Framing(size=4), [S.RecordType("r", S.Record([("v", "<u4")]))], offset="a * b")
    s = S([sec], header=hdr, order="little")
    with pytest.raises(lo.ConversionError, match=r"offset = 'a \* b' overflows int64"):
        lo.read_stream(struct.pack("<QQ", 2**40, 2**40) + b"\0" * 8, s)
    s2 = S(
        [S.Section(S.Framing(size=4), [S.RecordType("r", S.Record([("v", "<u4")]))], count="a // b")],
        header=hdr,
        order="little",
    )
    with pytest.raises(lo.ConversionError, match=r"count = 'a // b' divides by zero"):
        lo.read_stream(struct.pack("<QQ", 1, 0) + b"\0" * 8, s2)
    with pytest.raises(lo.ConversionError, match=r"count = 'a // b' is 4, more records than the 8 bytes"):
        lo.read_stream(struct.pack("<QQ", 4, 1) + b"\0" * 8, s2)


# --------------------------------------------------------------------------- mainframe V / VB
REC = np.dtype([("id", ">u4"), ("name", "S6")])


def _rdw(body):
    return struct.pack(">HH", len(body) + 4, 0) + body


def test_rdw_records_with_tails():
    bodies = [struct.pack(">I", i) + b"ABCDEF" + b"x" * i for i in range(6)]
    raw = b"".join(_rdw(b) for b in bodies)
    t = lo.read_stream(raw, S.rdw(REC, tail="column"))
    rows = t["record"].to_arrow().to_pylist()
    assert [r["id"] for r in rows] == list(range(6))
    assert [r["_tail"] for r in rows] == [b"x" * i for i in range(6)]
    assert rows[0]["_prefix"] == b"\x00\x0e\x00\x00"
    assert lo.write_stream(t, S.rdw(REC, tail="column")) == raw
    with pytest.raises(lo.ConversionError, match=r"longer than the type's 14 bytes of fields"):
        lo.read_stream(raw, S.rdw(REC))
    with pytest.raises(lo.ConversionError, match=r"says 3, a record of 3 bytes, less than the 4 bytes"):
        lo.read_stream(b"\x00\x03\x00\x00", S.rdw(REC))
    with pytest.raises(lo.LayoutError, match=r"the rdw built-in needs the record's layout: pass lo.Stream.rdw"):
        lo.read_stream(raw, "rdw")


def test_bdw_blocks_of_rdw_records():
    recs = [_rdw(struct.pack(">I", i) + b"NAME%02d" % i) for i in range(7)]
    blocks = [recs[:3], recs[3:4], recs[4:]]
    raw = b"".join(struct.pack(">HH", 4 + sum(map(len, b)), 0) + b"".join(b) for b in blocks)
    t = lo.read_stream(raw, S.bdw(REC))
    assert t["record"]["id"].to_numpy().tolist() == list(range(7))
    assert t["_blocks"]["_offset"].to_numpy().tolist() == [0, 46, 64]
    assert lo.write_stream(t, S.bdw(REC)) == raw
    with pytest.raises(lo.ConversionError, match=r"byte 0: block descriptor word says the block is 999 bytes, past"):
        lo.read_stream(struct.pack(">HH", 999, 0) + raw[4:], S.bdw(REC))
    # a record running past its block
    bad = struct.pack(">HH", 20, 0) + raw[4:]
    with pytest.raises(
        lo.ConversionError,
        match=r"byte 18: the record's length field \(byte 18\) says 14, a record "
        r"of 14 bytes, past the end of the data \(2 bytes left\)",
    ):
        lo.read_stream(bad, S.bdw(REC))


def test_record_from_dtype_errors():
    with pytest.raises(lo.LayoutError, match=r"record.b: field at offset 8 \(expected 4\)"):
        S.rdw(np.dtype([("a", ">u4"), ("b", ">u8")], align=True))


# --------------------------------------------------------------------------- sources and results
def test_sources_path_bytes_memoryview_file(tmp_path):
    raw = _tagged_bytes()[:10]
    p = tmp_path / "s.bin"
    p.write_bytes(raw)
    for src in (p, str(p), raw, bytearray(raw), memoryview(raw), np.frombuffer(raw, np.uint8)):
        t = lo.read_stream(src, _tagged("error"))
        assert t["b"]["w"].to_numpy().tolist() == [1]
    with open(p, "rb") as f:
        assert lo.read_stream(f, _tagged("error"))["a"]["v"].to_numpy().tolist() == [7]
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert len(lo.read_stream(empty, _tagged("error"))["a"]) == 0
    with pytest.raises(lo.ConversionError, match=r"cannot read .*missing.bin: No such file"):
        lo.read_stream(tmp_path / "missing.bin", _tagged("error"))
    with pytest.raises(lo.ConversionError, match=r"open the file in binary mode"):
        lo.read_stream(io.StringIO("x"), _tagged("error"))
    with pytest.raises(lo.ConversionError, match=r"needs a path, a bytes-like object or a binary file object, got int"):
        lo.read_stream(5, _tagged("error"))


def test_write_to_file_object_and_table_errors():
    raw = _tagged_bytes()[:10]
    t = lo.read_stream(raw, _tagged("error"))
    f = io.BytesIO()
    assert lo.write_stream(t, _tagged("error"), f) is None and f.getvalue() == raw
    with pytest.raises(lo.ConversionError, match=r"table 'zz' is no record type of <stream>"):
        lo.write_stream({"zz": t["a"]}, _tagged("error"))
    with pytest.raises(lo.ConversionError, match=r"table 'a' has no column '_offset'; add _offset"):
        lo.write_stream({"a": pa.table({"k": ["a"], "v": pa.array([1], pa.uint16())})}, _tagged("error"))
    with pytest.raises(lo.ConversionError, match=r"table 'a' is a int; give an SoA"):
        lo.write_stream({"a": 3}, _tagged("error"))
    two = pa.table({"_offset": [0, 0], "k": ["a", "a"], "v": pa.array([1, 2], pa.uint16())})
    with pytest.raises(lo.ConversionError, match=r"two records have _offset 0; the order of the stream is ambiguous"):
        lo.write_stream({"a": two}, _tagged("error"))
    # tables built by hand: any increasing _offset gives the order
    built = {"a": pa.table({"_offset": [5, 1], "k": ["a", "a"], "v": pa.array([1, 2], pa.uint16())})}
    assert lo.write_stream(built, _tagged("error")) == b"\x03a\x00\x02\x03a\x00\x01"


def test_widened_field_that_does_not_fit_is_an_error():
    s = S([S.Section(S.Framing(size=3), [S.RecordType("r", S.Record([("v", ">u3")]))])])
    t = lo.read_stream(b"\x01\x02\x03", s)
    assert t["r"]["v"].to_numpy().tolist() == [0x010203]
    with pytest.raises(lo.ConversionError, match=r"table 'r', row 0: field 'v' = 16777216 does not fit its 3 bytes"):
        lo.write_stream({"r": pa.table({"_offset": [0], "v": pa.array([2**24], pa.uint32())})}, s)


def test_length_that_cannot_be_written():
    s = S(
        [
            S.Section(
                S.Framing(length=S.Length(0, 1, "big")), [S.RecordType("r", S.Record([("v", "u1")]))], tail="column"
            )
        ]
    )
    big = {"r": pa.table({"_offset": [0], "v": pa.array([1], pa.uint8()), "_tail": [b"x" * 300]})}
    with pytest.raises(lo.ConversionError, match=r"table 'r', row 0: a record of 302 bytes cannot be framed"):
        lo.write_stream(big, s)


def test_text_with_a_nul_or_bad_utf8_is_an_error():
    raw, _ = itch_file(np.random.default_rng(12), ["A"], 2)
    bad = bytearray(raw)
    bad[38 + 2 + 24] = 0  # a byte of the second message's stock symbol
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 64: text field 'stock' of a itch50 section\[0\] "
        r"type 'add_order' record \(at byte 38\) holds a NUL byte",
    ):
        lo.read_stream(bytes(bad), "itch50")
    bad[38 + 2 + 24] = 0xFF
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 64: field 'stock' \(S8 at offset 24 in the record, 26 from its 2-byte "
        r"framing's start\) of a itch50 section\[0\] type 'add_order' record at byte 38: .* is not valid "
        r"UTF-8; .* drop it from the type's text list",
    ):
        lo.read_stream(bytes(bad), "itch50")


def test_a_new_description_or_source_compiles_nothing():
    from layouts.kernels import stream as K

    raw, _ = itch_file(np.random.default_rng(13), list(ITCH), 50)
    lo.write_stream(lo.read_stream(raw, "itch50"), "itch50")  # (grouped by the two walks)
    lo.read_stream(_tagged_bytes(), _tagged("skip"))  # (an unknown tag: the scan, then group)
    kernels = (K.scan, K._walk, K._group_count, K._group_place, K.gather, K.first_nul, K.scatter, K.put_fields, K.tiles)
    before = [len(k.signatures) for k in kernels]
    lo.write_stream(lo.read_stream(_tagged_bytes(), _tagged("keep")), _tagged("keep"))
    lo.read_stream(bytearray(raw), "itch50")
    lo.read_stream(np.frombuffer(raw, np.uint8).copy(), "itch50")
    assert [len(k.signatures) for k in kernels] == before


MULTI = warmup.MULTI  # a header, fixed records with tags, records framed by a length in words


def test_two_sections_fixed_tags_and_word_lengths(tmp_path):
    spec = tmp_path / "multi.toml"
    spec.write_text(MULTI)
    fixed = struct.pack("<Hf", 1, 21.5) + struct.pack("<HI", 2, 101325) + struct.pack("<Hf", 1, -3.0)
    notes = struct.pack("<HB", 2, 7) + b"x" + struct.pack("<HB", 3, 9) + b"abc"  # lengths in 2-byte words
    raw = b"MLTI" + struct.pack("<H", 3) + fixed + notes
    t = lo.read_stream(raw, spec)
    assert t["temp"].to_arrow().to_pylist() == [
        {"_offset": 6, "kind": 1, "celsius": 21.5},
        {"_offset": 18, "kind": 1, "celsius": -3.0},
    ]
    assert t["pressure"]["pascal"].to_numpy().tolist() == [101325]
    assert t["note"].to_arrow().to_pylist() == [
        {"_offset": 24, "flags": 7, "_tail": b"x"},
        {"_offset": 28, "flags": 9, "_tail": b"abc"},
    ]
    assert lo.write_stream(t, spec) == raw
    # a tail that leaves a record of an odd number of bytes cannot be said in words
    t2 = dict(t)
    t2["note"] = pa.table({"_offset": [0], "flags": pa.array([1], pa.uint8()), "_tail": [b"xy"]})
    with pytest.raises(
        lo.ConversionError,
        match=r"table 'note', row 0: a record of 5 bytes cannot be framed: its "
        r"length field \(2 bytes, unit 2, counting from 0\) cannot say it; cut or pad its _tail to a record of 4 or 6 bytes",
    ):
        lo.write_stream(t2, spec)
    # a record too short for its type stops the scan there (not at the garbage after it)
    with pytest.raises(
        lo.ConversionError,
        match=r"<buffer>: byte 24: a multi section\[1\] type 'note' record of 2 "
        r"bytes, shorter than the type's 3 bytes of fields",
    ):
        lo.read_stream(raw[:24] + struct.pack("<H", 1) + raw[26:], spec)


def test_decimals_of_signed_and_nullable_columns():
    s = S(
        [S.Section(S.Framing(size=4), [S.RecordType("r", S.Record([("px", "<i4")], decimals={"px": 4}))])],
        order="little",
    )
    t = lo.read_stream(struct.pack("<ii", -12345, 2**31 - 1), s)
    assert [str(d) for d in t.decimal("r", "px").to_pylist()] == ["-1.2345", "214748.3647"]
    from layouts._stream.read import scaled

    col = pa.array([None, 2**64 - 1, 5], pa.uint64()).slice(1)
    assert [str(d) for d in scaled(col, 2).to_pylist()] == ["184467440737095516.15", "0.05"]
    with_null = pa.array([3, None], pa.int64())
    assert scaled(with_null, 1).to_pylist()[1] is None


def test_pcap_with_no_packets_and_only_empty_packets():
    empty = _pcap_by_hand("<", False, [])
    t = lo.read_stream(empty, "pcap")
    assert len(t["packet"]) == 0 and t["packet"].to_arrow().schema.field("_tail").type == pa.binary()
    assert lo.write_stream(t, "pcap") == empty
    zeros = _pcap_by_hand(">", True, [(1, 2, b"", 0), (3, 4, b"", 60)])
    t = lo.read_stream(zeros, "pcap")
    assert t["packet"].to_arrow().column("_tail").to_pylist() == [b"", b""]
    assert lo.write_stream(t, "pcap") == zeros


def test_a_counted_section_with_kept_unknown_records_goes_back(tmp_path):
    """read_stream counts records of no type (kept with unknown = "keep") against the
    header's count; write_stream counts them too (it counted typed records only)."""
    spec = tmp_path / "counted.toml"
    spec.write_text(
        'name = "counted"\norder = "little"\n[header]\nfields = [["n", "<u4"]]\n'
        '[[section]]\ncount = "n"\nunknown = "keep"\ntag = {offset = 0, size = 1}\n'
        'framing = {size = 3}\n[section.types.a]\ntag = "A"\nfields = [["kind", "S1"], ["v", "<u2"]]\n'
    )
    raw = struct.pack("<I", 3) + b"A\x01\x00" + b"Z\x02\x00" + b"A\x03\x00"
    t = lo.read_stream(raw, spec)
    assert (t["a"].to_arrow().num_rows, t["_unknown"].to_arrow().num_rows) == (2, 1)
    assert lo.write_stream(t, spec) == raw


# ------------------------------------------------ the fused gather (reading through the offsets)
def _itch_day(size, seed=0):
    from layouts.benchmarks.itch_day import day_bytes

    return day_bytes(size, seed)


def _dense_reference(buf, record, offsets, order="big", prefix=2):
    """One type's table the way the reader made it before the fused gather: the records
    copied into a dense buffer (K.gather), then the ordinary one-pass transpose."""
    from layouts.kernels import stream as K

    layout, runs, _, offset_at = record.plan(order, prefix, True, False)
    r = np.array(runs, np.int64).reshape(-1, 3)
    dense = np.zeros(len(offsets) * layout.itemsize, np.uint8)
    K.gather(buf, offsets, r[:, 0].copy(), r[:, 1].copy(), r[:, 2].copy(), dense, layout.itemsize, offset_at)
    return lo.AoS(dense.view(layout.dtype), layout).to_soa(threads=1).to_arrow()


def test_fused_gather_equals_the_dense_copy_over_many_blocks_and_chunks():
    # a day's mix, several MB: every main type spans many blocks of rows and (on two or
    # more cores) several chunks; each table equals the dense copy's, column by column
    buf = _itch_day(4_000_000)
    spec = lo.Stream.builtin("itch50")
    t = lo.read_stream(buf, spec)
    by_type = {rt.name: rt.record for rt in spec.sections[0].types}
    assert len(t["add_order"]) > 50_000
    for name, soa in t.items():
        if name.startswith("_"):
            continue
        got = soa.to_arrow()
        offsets = got.column("_offset").to_numpy()
        assert got.equals(_dense_reference(buf, by_type[name], offsets)), name


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_fused_gather_kernel_any_thread_count(threads, monkeypatch):
    # the kernel's own entry, forced into several chunks: the same columns whatever the count
    from layouts._arena import Arena
    from layouts._plan import forward_ops
    from layouts.kernels import stream as K
    from layouts.kernels import threads as T

    monkeypatch.setattr(T, "MIN_CHUNK_BYTES", 64 * 1024)  # chunks of ~1,000 rows: many, each many blocks

    buf = _itch_day(3_000_000, seed=2)
    spec = lo.Stream.builtin("itch50")
    record = {rt.name: rt.record for rt in spec.sections[0].types}["add_order"]
    offsets = lo.read_stream(buf, spec)["add_order"].to_arrow().column("_offset").to_numpy().copy()
    layout, runs, _, offset_at = record.plan("big", 2, True, False)
    arena = Arena(layout, len(offsets))
    memory = arena.allocate()
    ops, offs, keep = forward_ops(arena, memory.ctypes.data, {})
    nul = np.array([(layout[n].offset, layout[n].width) for n in record.text], np.int64).reshape(-1, 2)
    assert (
        K.aos_to_soa_at(
            buf,
            offsets,
            layout.itemsize,
            np.array(runs, np.int64).reshape(-1, 3),
            offset_at,
            nul,
            ops,
            offs,
            threads=threads,
        )
        is None
    )
    from layouts._soa import soa_over_arena

    got = soa_over_arena(layout, len(offsets), arena, memory, {}, None).to_arrow()
    assert len(T.chunk_starts(len(offsets), layout.itemsize, threads)) - 1 == min(threads, 25)
    assert got.equals(_dense_reference(buf, record, offsets))


def test_text_errors_deep_in_a_stream_name_the_record():
    # far past the first block of rows (and chunk): the error still names the record's byte
    raw, _ = itch_file(np.random.default_rng(13), ["A"], 3000)
    size = 2 + ITCH_LENGTHS["A"]
    bad = bytearray(raw)
    at = 2500 * size
    bad[at + 2 + 24] = 0
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {at + 2 + 24}: text field 'stock' of a itch50 "
        rf"section\[0\] type 'add_order' record \(at byte {at}\) holds a NUL",
    ):
        lo.read_stream(bytes(bad), "itch50")
    bad[at + 2 + 24] = 0xFF
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {at + 2 + 24}: field 'stock' .* of a itch50 section\[0\] type "
        rf"'add_order' record at byte {at}: .*not valid UTF-8",
    ):
        lo.read_stream(bytes(bad), "itch50")


def test_fused_scatter_round_trip_and_a_value_too_wide_deep_in_a_table():
    buf = _itch_day(3_000_000, seed=4)
    t = lo.read_stream(buf, "itch50")
    assert lo.write_stream(t, "itch50") == buf.tobytes()
    # a widened field (the 6-byte timestamp) with a value that does not fit, far into the table
    table = t["add_order"].to_arrow()
    k = len(table) - 3
    ts = table.column("timestamp").to_numpy().copy()
    ts[k] = 2**48
    tables = dict(t)
    tables["add_order"] = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", pa.array(ts))
    with pytest.raises(
        lo.ConversionError,
        match=rf"table 'add_order', row {k}: field 'timestamp' = {2**48} does "
        rf"not fit its 6 bytes",
    ):
        lo.write_stream(tables, "itch50")


_KINDS = ["u1", ">u2", "<u4", ">i8", ">u3", "<u6", ">u5", "S3", "S1", "<f4", ">f8", "<i2"]


def _random_stream(rng):
    """A random description (1-3 tagged types of random fields, odd widths and text among
    them; a 1- or 2-byte length of either order; tails kept or not) and a random stream
    of it: ``(Stream, bytes, {type name: Record})``."""
    ntypes = int(rng.integers(1, 4))
    order = "big" if rng.integers(0, 2) else "little"
    tails = bool(rng.integers(0, 2))
    letters = bool(rng.integers(0, 2))  # every byte a letter, or any byte (then no text fields)
    types = []
    for k in range(ntypes):
        fields = [("tag", "u1")] + [
            (f"f{j}", _KINDS[int(rng.integers(0, len(_KINDS)))]) for j in range(int(rng.integers(1, 7)))
        ]
        text = tuple(n for n, t in fields if letters and t.startswith("S") and rng.integers(0, 2))
        types.append(S.RecordType(f"t{k}", S.Record(fields, text=text), 65 + k))
    size = int(rng.integers(1, 3))
    section = S.Section(
        S.Framing(length=S.Length(0, size, order)), types, tag=S.Tag(0, 1), tail="column" if tails else "error"
    )
    out = bytearray()
    for _ in range(int(rng.integers(0, 3000))):
        k = int(rng.integers(0, ntypes))
        fixed = types[k].record.size("big")
        body = rng.integers(65, 91, fixed, dtype=np.uint8) if letters else rng.integers(0, 256, fixed, dtype=np.uint8)
        body[0] = 65 + k
        tail = rng.integers(0, 256, int(rng.integers(0, 5)) if tails else 0, dtype=np.uint8).tobytes()
        n = fixed + len(tail)
        if n >= 1 << (8 * size):
            continue
        out += n.to_bytes(size, order) + body.tobytes() + tail
    return S([section]), bytes(out), {t.name: t.record for t in types}


@pytest.mark.parametrize("seed", range(12))
def test_random_descriptions_fused_gather_equals_the_dense_copy_and_goes_back(seed):
    # random fields (odd widths, text, floats, either order), random streams: every table
    # equals the dense copy + transpose of the same records, and the stream goes back
    rng = np.random.default_rng(1000 + seed)
    spec, raw, records = _random_stream(rng)
    t = lo.read_stream(raw, spec)
    buf = np.frombuffer(raw, np.uint8)
    prefix = spec.sections[0].framing.prefix
    for name, record in records.items():
        got = t[name].to_arrow()
        offsets = got.column("_offset").to_numpy().copy()
        want = _dense_reference(buf, record, offsets, order=spec.order, prefix=prefix)
        got = got.drop_columns([c for c in got.column_names if c == "_tail"])
        assert got.schema.equals(want.schema), (seed, name)
        for a, b in zip(got.columns, want.columns):  # floats bit for bit (random bytes make NaNs)
            if pa.types.is_floating(a.type):
                bits = np.dtype(f"u{a.type.bit_width // 8}")
                assert np.array_equal(a.to_numpy().view(bits), b.to_numpy().view(bits)), (seed, name)
            else:
                assert a.equals(b), (seed, name)
    assert lo.write_stream(t, spec) == raw


# ------------------------------------------------ on the GPU (the simulator without one)
@pytest.mark.slow
def test_read_stream_on_the_gpu_equals_the_cpu():
    # every ITCH type gathered and transposed on the device; a pcap's packets (tails)
    # converted on the CPU and moved; every table on the device, equal to the CPU's
    raw, _ = itch_file(np.random.default_rng(21), list(ITCH), 12)
    cpu, gpu = lo.read_stream(raw, "itch50"), lo.read_stream(raw, "itch50", device="cuda")
    assert set(gpu) == set(cpu)
    for name in cpu:
        assert gpu[name].device == "cuda", name
        assert gpu[name].to_device("cpu").to_arrow().equals(cpu[name].to_arrow()), name
    cap = _pcap_by_hand("<", False, _packets(np.random.default_rng(22), 6))
    cpu, gpu = lo.read_stream(cap, "pcap"), lo.read_stream(cap, "pcap", device="cuda")
    for name in cpu:
        assert gpu[name].device == "cuda"
        assert gpu[name].to_device("cpu").to_arrow().equals(cpu[name].to_arrow()), name


@pytest.mark.slow
def test_gpu_read_errors_are_the_cpu_ones():
    raw, _ = itch_file(np.random.default_rng(23), ["A"], 3)
    size = 2 + ITCH_LENGTHS["A"]
    bad = bytearray(raw)
    bad[size + 2 + 24] = 0
    with pytest.raises(lo.ConversionError, match=rf"byte {size + 26}: text field 'stock' .* holds a NUL byte"):
        lo.read_stream(bytes(bad), "itch50", device="cuda")
    bad[size + 2 + 24] = 0xFF
    with pytest.raises(
        lo.ConversionError,
        match=rf"<buffer>: byte {size + 26}: field 'stock' .* of a itch50 section\[0\] type 'add_order' "
        rf"record at byte {size}: .*not valid UTF-8",
    ):
        lo.read_stream(bytes(bad), "itch50", device="cuda")
    with pytest.raises(lo.LayoutError, match="device"):
        lo.read_stream(raw, "itch50", device="tpu")


def test_the_gpu_gather_byte_map():
    from layouts.kernels.cuda.gather import ZERO, byte_map

    # runs (source, place, length): 2 bytes from 5 to 8, 3 from 0 to 13 (a widened u3), offset at 0
    m = byte_map(16, [(5, 8, 2), (0, 13, 3)], 0)
    assert m.tolist() == [-2, -3, -4, -5, -6, -7, -8, -9, 5, 6, ZERO, ZERO, ZERO, 0, 1, 2]


def test_fixed_size_records_are_read_in_place_and_checked_as_the_scan_checks_them():
    # fixed-size records of one type take the strided path (no walk, no gather): same
    # columns and offsets as the gathered path, NULs in text and bad UTF-8 named by byte,
    # a truncated last record reported as the scan reports it, and windows cut the same
    S = lo.Stream
    rec = S.Record([("name", "S4"), ("a", "<u4"), ("b", ">i2")], text=("name",))
    fixed = S([S.Section(S.Framing(size=10), [S.RecordType("r", rec)])])
    tagged = S([S.Section(S.Framing(size=10), [S.RecordType("r", rec, tag=ord("n"))], tag=S.Tag(0, 1))])
    rng = np.random.default_rng(5)
    rows = np.zeros(1000, [("name", "S4"), ("a", "<u4"), ("b", ">i2")])
    rows["name"] = [b"n" + bytes(rng.integers(97, 123, 3, dtype=np.uint8)) for _ in range(1000)]
    rows["a"], rows["b"] = rng.integers(0, 2**32, 1000), rng.integers(-(2**15), 2**15, 1000)
    raw = rows.tobytes()
    got = lo.read_stream(raw, fixed)["r"].to_arrow()
    assert got.equals(lo.read_stream(raw, tagged)["r"].to_arrow())  # (a tag: the walk and the gather)
    assert got.column("_offset").to_pylist() == list(range(0, 10_000, 10))
    assert got.column("b").to_numpy().tolist() == rows["b"].tolist()
    assert lo.write_stream(lo.read_stream(raw, fixed), fixed) == raw
    bad = bytearray(raw)
    bad[10 * 417 + 2] = 0
    for value, want in (
        (0, r"byte 4170: text field 'name' .* holds a NUL byte"),
        (0xFF, r"byte 4170: .*not valid UTF-8"),
    ):
        bad[10 * 417 + 2] = value
        with pytest.raises(lo.ConversionError, match=want) as err:
            lo.read_stream(bytes(bad), fixed)
        with pytest.raises(lo.ConversionError) as gathered:
            lo.read_stream(bytes(bad), tagged)
        assert str(err.value) == str(gathered.value)
    with pytest.raises(lo.ConversionError, match=r"byte 9990: the last record is truncated: 7 bytes left"):
        lo.read_stream(raw[:-3], fixed)


def test_text_fast_and_general_paths_agree_across_blocks_and_chunks():
    # text values that are plain ASCII take a word-at-a-time copy; a block holding any
    # other byte goes through the general string kernel: the columns, the round trip
    # and the first bad value's error are the same wherever the blocks and chunks fall
    S = lo.Stream
    rec = S.Record([("kind", "S1"), ("name", "S6"), ("v", "<u4")], text=("kind", "name"))
    spec = S([S.Section(S.Framing(size=11), [S.RecordType("r", rec, tag="n")], tag=S.Tag(0, 1))])
    n = 200_000  # about 3.8 MB packed: two chunks on two threads, many blocks each
    rows = np.zeros(n, [("kind", "S1"), ("name", "S6"), ("v", "<u4")])
    rows["kind"], rows["name"], rows["v"] = b"n", b"abcdef", np.arange(n)
    for i in (5, 70_001, n - 1):
        rows["name"][i] = "ab\u00e9cd".encode()  # 2-byte UTF-8
    raw = rows.tobytes()
    got = lo.read_stream(raw, spec)
    names = got["r"].to_arrow().column("name").to_pylist()
    assert names[5] == names[70_001] == names[-1] == "ab\u00e9cd" and names[6] == names[150_000] == "abcdef"
    assert got["r"].to_arrow().column("kind").to_pylist() == ["n"] * n
    assert lo.write_stream(got, spec) == raw
    bad = bytearray(raw)
    bad[11 * 150_000 + 3] = 0xFF
    with pytest.raises(
        lo.ConversionError, match=r"byte 1650001: field 'name' .* type 'r' record at byte 1650000: .*not valid UTF-8"
    ):
        lo.read_stream(bytes(bad), spec)


def test_text_of_every_width_matches_the_bytes_and_a_nul_is_named():
    # plain-ASCII text goes one load and store per value for widths 1, 2, 4, 8 and a word
    # at a time beyond, checked for NULs in the same look; a block with a non-ASCII value
    # takes the general kernel; a NUL in any of them is named by field and byte
    S = lo.Stream
    widths = (1, 2, 3, 4, 8, 12)
    dt = np.dtype([("k", "S1")] + [(f"t{w}", f"S{w}") for w in widths] + [("v", "<u2")])
    names = tuple(f"t{w}" for w in widths)
    rec = S.Record([(n, dt[n].str.lstrip("|")) for n in dt.names], text=("k",) + names)
    spec = S([S.Section(S.Framing(size=dt.itemsize), [S.RecordType("r", rec, tag="k")], tag=S.Tag(0, 1))])
    n = 5_000
    rng = np.random.default_rng(3)
    rows = np.zeros(n, dt)
    rows["k"], rows["v"] = b"k", np.arange(n)
    for w in widths:
        rows[f"t{w}"] = rng.integers(32, 127, (n, w), dtype=np.uint8).view(f"S{w}").ravel()
    rows["t3"][4_321] = "a\u00e9".encode()  # 2-byte UTF-8 in one block
    raw = rows.tobytes()
    got = lo.read_stream(raw, spec)["r"].to_arrow()
    for w in widths:
        want = [bytes(b).decode() for b in rows[f"t{w}"].view((np.uint8, w))]
        assert got.column(f"t{w}").to_pylist() == want, w
    assert got.column("v").to_pylist() == list(range(n))
    bad = bytearray(raw)
    bad[dt.itemsize * 3_000 + dt.fields["t8"][1] + 7] = 0
    with pytest.raises(lo.ConversionError, match=rf"byte {dt.itemsize * 3_000 + dt.fields['t8'][1]}: text field 't8'"):
        lo.read_stream(bytes(bad), spec)


def test_grouped_scan_equals_scan_then_group_or_hands_the_section_back():
    # two walks (count, place) give what scan + group give for a section whose records
    # are all exactly their types' fields; anything else (an unknown tag, a record
    # longer or shorter than its fields, a truncated one) is left to the scan (None)
    from layouts._stream.frame import section_params
    from layouts.kernels import stream as K

    raw, _ = itch_file(np.random.default_rng(5), list(ITCH), 3000)
    buf = np.frombuffer(raw, np.uint8)
    stream = lo.Stream.builtin("itch50")
    s = stream.sections[0]
    lp, tp, type_min, min_len = section_params(stream, s, "big", {}, "w")

    def grouped(b):
        fr = (lp[0], lp[1], lp[2], lp[4], min_len, *tp[:3], tp[5], type_min, type_min)
        return K.scan_grouped(b, 0, len(b), fr, lp[3])

    offsets, bounds = grouped(buf)
    n = len(offsets)
    o, ln, t = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int32)
    status, pos, count = K.scan(buf, 0, len(buf), 0, -1, *lp, min_len, *tp, 0, type_min, o, ln, t, 0 * type_min)
    assert (status, pos, count) == (K.OK, len(buf), n)
    g_o, g_l = np.empty_like(o), np.empty_like(ln)
    assert (K.group(t, len(s.types), o, ln, g_o, g_l) == bounds).all() and (g_o == offsets).all()
    first = int(offsets[bounds[2]]) if bounds[3] > bounds[2] else 0  # a record of the second type
    for damage in ("tag", "long", "short", "cut"):
        bad = bytearray(raw)
        if damage == "tag":
            bad[first + 2] = ord("~")
        elif damage in ("long", "short"):
            size = int.from_bytes(bad[first : first + 2], "big")
            bad[first : first + 2] = (size + (1 if damage == "long" else -1)).to_bytes(2, "big")
        else:
            bad = bad[:-3]
        assert grouped(np.frombuffer(bytes(bad), np.uint8)) is None, damage


def test_grouped_scan_in_two_parts_is_confirmed_or_redone(monkeypatch):
    # a long section is walked in parts (K.LANES a thread, side by side), each after the
    # first from a guessed record boundary (16 records in a row that fit) that the part
    # before it must end on: a guess inside a record's bytes (here a field holding a fake
    # run of records) is refuted, and the section walked again as one part; the index is
    # the one scan + group give
    from layouts.kernels import stream as K

    monkeypatch.setattr(K, "SPLIT_BYTES", 0)
    fake = b"".join(b"\x00\x03a\x00" + bytes([i]) for i in range(20))  # 20 records of type 'a' as bytes
    S = lo.Stream
    types = [
        S.RecordType("a", S.Record([("k", "S1"), ("v", ">u2")]), "a"),
        S.RecordType("b", S.Record([("k", "S1"), ("blob", f"S{len(fake)}")]), "b"),
    ]
    spec = S([S.Section(S.Framing(length=S.Length(0, 2, "big")), types, tag=S.Tag(0, 1))])
    small = b"\x00\x03a\x00\x07"
    big = (1 + len(fake)).to_bytes(2, "big") + b"b" + fake
    seen = []
    grouped = K._grouped
    monkeypatch.setattr(K, "_grouped", lambda buf, parts, *a: seen.append(len(parts)) or grouped(buf, parts, *a))
    one_thread, two_threads = K.LANES + 1, 2 * K.LANES + 1  # (the parts' bounds)
    for before in (100, 200):  # a guess inside the big record with one thread and two; with two only
        raw = small * before + big + small * 100
        lp, tp, type_min, min_len = __import__("layouts._stream.frame", fromlist=["x"]).section_params(
            spec, spec.sections[0], "big", {}, "w"
        )
        b = np.frombuffer(raw, np.uint8)
        args = (b, 0, len(b), (lp[0], lp[1], lp[2], lp[4], min_len, *tp[:3], tp[5], type_min, type_min), lp[3])
        seen.clear()
        one, two = K.scan_grouped(*args, threads=1), K.scan_grouped(*args, threads=2)
        assert (one[0] == two[0]).all() and (one[1] == two[1]).all()
        # refuted: one part again; confirmed: the parts
        assert seen == ([one_thread, 2] if before == 100 else [one_thread]) + [two_threads, 2]
        t = lo.read_stream(raw, spec)
        assert t["a"]["_offset"].to_numpy().tolist() == [5 * i for i in range(before)] + [
            5 * before + len(big) + 5 * i for i in range(100)
        ]
        assert t["b"]["blob"].to_numpy().tolist() == [fake]


def test_tiles_finds_records_that_go_back_where_they_were():
    # write_stream skips the sort when the records tile the section in _offset order
    from layouts.kernels.stream import tiles

    def t(keys, sizes, start=10):
        return bool(tiles(np.array(keys, np.int64), np.array(sizes, np.int64), start))

    assert t([10, 13, 20], [3, 7, 5]) and t([20, 10, 13], [5, 3, 7]) and t([], [])
    assert not t([11, 13, 20], [2, 7, 5])  # does not start at start
    assert not t([10, 14, 20], [3, 6, 6])  # a gap (and a piece past the end)
    assert not t([10, 12, 20], [3, 8, 4])  # an overlap
    assert not t([10, 10, 15], [5, 5, 5])  # the same key twice
    assert not t([10, 15, 20], [5, 0, 5])  # an empty piece
    assert not t([10, 12, 14], [4, 4, 4]) and not t([10, 13], [4, 3])  # overlaps, the sum right
