"""A synthetic NASDAQ TotalView-ITCH 5.0 day file, written with NumPy and one Numba loop (no part of layouts).

    python -m benchmarks.itch_day --size 4GB --out day.itch      # a few GB, about 130 M messages
    python -m benchmarks.itch_day --size 20MB --out small.itch --seed 3
    python -m benchmarks.itch_day --size 2GB --out day.itch --read 3   # then time read_stream of it

Every message is one of the 23 types of the *Nasdaq TotalView-ITCH 5.0* specification in
its current revision (with the LULD Auction Collar 'J', the Operational Halt 'h' and the
Direct Listing with Capital Raise Price Discovery 'O'), behind the 2-byte big-endian length
of NASDAQ's day files, with the timestamps (6-byte nanoseconds since midnight) increasing
and every Alpha field printable ASCII, space padded.

**The message mix.** The shares of the order messages follow the figures itch-book's
README (https://github.com/groovg/itch-book, "Benchmarks", "Book design" and "Symbols,
depth, batches") gives for NASDAQ's 2019-12-30 day file ``12302019.NASDAQ_ITCH50``:
268.7 M messages for 8,907 symbols, 118 M add orders (A and F: 43.9 %), deletes about
43 %, 4,024,315 NOII messages (1.5 %), 8,966 trading actions, 9,013 Reg SHO messages and
34 LULD auction collars. The split of the remaining 11.6 % (replace U 7.8 %, executed E
2.3 %, cancel X 1.1 %, non-cross trade P 0.6 %, executed with price C 0.06 %) and of the
adds (F: 2.5 % of them) is this generator's estimate, not a published table: it is
stated in ``ORDER_MIX`` so a measured day's counts can replace it.
Per-symbol administrative messages scale with the number of symbols, which is one per
30,000 messages as on that day (at most 8,907): a stock directory R, a trading action H,
a Reg SHO message Y and two market participant positions L per symbol at the start of the
day; opening and closing crosses Q at 09:30 and 16:00; NOII I in the five minutes before
the open and the ten before the close. The rare types (V, W, K, J, h, B, N, O) occur a few
times each (W, a circuit-breaker breach, once, so every type is present).

**Consistency.** Every order reference an E, C, X, D or U names was added earlier (by an
A, an F, or a U's new reference) and is still live; an execution or cancel takes fewer
shares than the order has left (or, for a final execution, exactly what is left), so a
book replay resolves every reference and never clamps. References are handed out in the
order the orders appear; match numbers increase over the day; a B breaks an earlier match.
Prices are in whole cents (Price(4) multiples of 100) near each symbol's price (log-normal
over $1..$1000), bids below it and offers above, so no book is ever crossed; shares mostly
round lots. Timestamps follow the U-shaped intensity of a
trading day (quiet pre-market from 04:00 and after-hours to 20:00).

**How.** The day is generated in slices of about 260,000 messages, each covering the
span of the day that holds its share of the messages; an order's life (its add, replaces,
partial executions or cancels, and its end) lies within one slice, so memory is bounded by
a slice whatever the size. Each slice's messages are sorted by time; each type's records
are built as its structured array and copied (one Numba loop, ``_place``) straight to their
places in the slice's bytes.
"""

import argparse
import os
import re
import sys
import time

import numba
import numpy as np

DAY_NS = 86_400 * 10**9
HOUR = 3_600 * 10**9
MINUTE = 60 * 10**9

HEADER = [
    ("length", ">u2"),
    ("message_type", "S1"),
    ("stock_locate", ">u2"),
    ("tracking_number", ">u2"),
    ("timestamp_high", ">u2"),
    ("timestamp_low", ">u4"),
]

# The fields after the common header, per message type, in the specification's order.
BODY = {
    "S": [("event_code", "S1")],
    "R": [
        ("stock", "S8"),
        ("market_category", "S1"),
        ("financial_status_indicator", "S1"),
        ("round_lot_size", ">u4"),
        ("round_lots_only", "S1"),
        ("issue_classification", "S1"),
        ("issue_sub_type", "S2"),
        ("authenticity", "S1"),
        ("short_sale_threshold_indicator", "S1"),
        ("ipo_flag", "S1"),
        ("luld_reference_price_tier", "S1"),
        ("etp_flag", "S1"),
        ("etp_leverage_factor", ">u4"),
        ("inverse_indicator", "S1"),
    ],
    "H": [("stock", "S8"), ("trading_state", "S1"), ("reserved", "S1"), ("reason", "S4")],
    "Y": [("stock", "S8"), ("reg_sho_action", "S1")],
    "L": [
        ("mpid", "S4"),
        ("stock", "S8"),
        ("primary_market_maker", "S1"),
        ("market_maker_mode", "S1"),
        ("market_participant_state", "S1"),
    ],
    "V": [("level_1", ">u8"), ("level_2", ">u8"), ("level_3", ">u8")],
    "W": [("breached_level", "S1")],
    "K": [
        ("stock", "S8"),
        ("ipo_quotation_release_time", ">u4"),
        ("ipo_quotation_release_qualifier", "S1"),
        ("ipo_price", ">u4"),
    ],
    "J": [
        ("stock", "S8"),
        ("auction_collar_reference_price", ">u4"),
        ("upper_auction_collar_price", ">u4"),
        ("lower_auction_collar_price", ">u4"),
        ("auction_collar_extension", ">u4"),
    ],
    "h": [("stock", "S8"), ("market_code", "S1"), ("operational_halt_action", "S1")],
    "A": [
        ("order_reference_number", ">u8"),
        ("buy_sell_indicator", "S1"),
        ("shares", ">u4"),
        ("stock", "S8"),
        ("price", ">u4"),
    ],
    "F": [
        ("order_reference_number", ">u8"),
        ("buy_sell_indicator", "S1"),
        ("shares", ">u4"),
        ("stock", "S8"),
        ("price", ">u4"),
        ("attribution", "S4"),
    ],
    "E": [("order_reference_number", ">u8"), ("executed_shares", ">u4"), ("match_number", ">u8")],
    "C": [
        ("order_reference_number", ">u8"),
        ("executed_shares", ">u4"),
        ("match_number", ">u8"),
        ("printable", "S1"),
        ("execution_price", ">u4"),
    ],
    "X": [("order_reference_number", ">u8"), ("cancelled_shares", ">u4")],
    "D": [("order_reference_number", ">u8")],
    "U": [
        ("original_order_reference_number", ">u8"),
        ("new_order_reference_number", ">u8"),
        ("shares", ">u4"),
        ("price", ">u4"),
    ],
    "P": [
        ("order_reference_number", ">u8"),
        ("buy_sell_indicator", "S1"),
        ("shares", ">u4"),
        ("stock", "S8"),
        ("price", ">u4"),
        ("match_number", ">u8"),
    ],
    "Q": [("shares", ">u8"), ("stock", "S8"), ("cross_price", ">u4"), ("match_number", ">u8"), ("cross_type", "S1")],
    "B": [("match_number", ">u8")],
    "I": [
        ("paired_shares", ">u8"),
        ("imbalance_shares", ">u8"),
        ("imbalance_direction", "S1"),
        ("stock", "S8"),
        ("far_price", ">u4"),
        ("near_price", ">u4"),
        ("current_reference_price", ">u4"),
        ("cross_type", "S1"),
        ("price_variation_indicator", "S1"),
    ],
    "N": [("stock", "S8"), ("interest_flag", "S1")],
    "O": [
        ("stock", "S8"),
        ("open_eligibility_status", "S1"),
        ("minimum_allowable_price", ">u4"),
        ("maximum_allowable_price", ">u4"),
        ("near_execution_price", ">u4"),
        ("near_execution_time", ">u8"),
        ("lower_price_range_collar", ">u4"),
        ("upper_price_range_collar", ">u4"),
    ],
}
TYPES = list(BODY)
DTYPES = {t: np.dtype(HEADER + BODY[t]) for t in TYPES}
# the message length of each type (the 2-byte length field not counted), as the specification's tables give it
LENGTH = {t: DTYPES[t].itemsize - 2 for t in TYPES}
SIZES = np.array([DTYPES[t].itemsize for t in TYPES])  # each type's bytes in the stream, its length field too

# Shares of the order flow among all messages (see the module docstring).
ORDER_MIX = {"A": 0.428, "F": 0.011, "D": 0.430, "U": 0.078, "E": 0.023, "X": 0.011, "P": 0.006, "C": 0.0006}
NOII_SHARE = 0.015
MESSAGES_PER_SYMBOL = 30_000
MAX_SYMBOLS = 8_907

WELL_KNOWN = [
    "AAPL",
    "MSFT",
    "AMZN",
    "NVDA",
    "GOOGL",
    "GOOG",
    "META",
    "TSLA",
    "AVGO",
    "PEP",
    "COST",
    "CSCO",
    "ADBE",
    "NFLX",
    "AMD",
    "INTC",
    "QQQ",
    "SPY",
    "TQQQ",
    "SQQQ",
    "CMCSA",
    "TXN",
    "QCOM",
    "AMGN",
    "HON",
    "SBUX",
    "INTU",
    "ISRG",
    "GILD",
    "MDLZ",
    "BKNG",
    "ADP",
    "VRTX",
    "REGN",
    "PYPL",
    "MU",
    "LRCX",
    "ATVI",
    "CSX",
    "MRNA",
    "ZM",
    "JD",
    "PDD",
    "BIDU",
    "ABNB",
    "IWM",
    "XLF",
    "TLT",
    "GLD",
    "SOXL",
]
MPIDS = [
    "NITE",
    "VIRT",
    "CDRG",
    "GSCO",
    "MSCO",
    "JPMS",
    "UBSS",
    "CITI",
    "SUSQ",
    "JANE",
    "TWOS",
    "HRTF",
    "IMCC",
    "LATS",
    "XTXX",
    "BARD",
]


def _symbols(rng, n):
    """``n`` distinct tickers: the well-known ones first, then 1..5 uppercase letters."""
    names = list(WELL_KNOWN[:n])
    seen = set(names)
    while len(names) < n:
        letters = rng.integers(65, 91, (2 * n, 5), dtype=np.uint8)
        widths = rng.choice([1, 2, 3, 4, 5], 2 * n, p=[0.005, 0.045, 0.25, 0.6, 0.1])
        for row, w in zip(letters, widths):
            name = row[:w].tobytes().decode()
            if name not in seen:
                seen.add(name)
                names.append(name)
                if len(names) == n:
                    break
    return np.array([s.ljust(8).encode() for s in names], "S8")


class Universe:
    """The day's symbols: locate codes 1..n, tickers, a price each (Price(4)), a popularity each."""

    def __init__(self, rng, n):
        self.n = n
        self.stock = _symbols(rng, n)
        dollars = np.exp(rng.normal(np.log(30.0), 1.2, n)).clip(1.0, 1000.0)
        self.price = (np.round(dollars * 100) * 100).astype(np.int64)
        weight = 1.0 / np.arange(1, n + 1) ** 0.9  # Zipf-like: a few names carry most messages
        self.weight = weight / weight.sum()

    def pick(self, rng, k):
        return rng.choice(self.n, k, p=self.weight)

    def near(self, rng, idx, ticks=20):
        """Prices in whole cents near each symbol's price, at least one cent."""
        off = np.rint(rng.normal(0.0, ticks, len(idx))).astype(np.int64) * 100
        return np.maximum(self.price[idx] + off, 100)


def _intensity_cdf():
    """(time in ns, cumulative share of the order flow) on a one-minute grid from 04:00 to 20:00."""
    minutes = np.arange(4 * 60, 20 * 60 + 1)
    x = (minutes - 9.5 * 60) / (6.5 * 60)  # 0 at the open, 1 at the close
    regular = (x >= 0) & (x <= 1)
    density = np.where(regular, 1.0 + 6.0 * (x - 0.5) ** 2 * 4 / 3, 0.08)
    density[(minutes >= 9 * 60 + 25) & (minutes < 9 * 60 + 30)] = 0.6
    cdf = np.concatenate([[0.0], np.cumsum(density[:-1])])
    return minutes.astype(np.int64) * MINUTE, cdf / cdf[-1]


class Batch:
    """Messages of one slice before they are sorted: per type, a time array and field columns."""

    def __init__(self):
        self.parts = {}
        self.instances = 0

    def add(self, kind, t, **cols):
        t = (
            np.floor(np.asarray(t, np.float64)).astype(np.int64)
            if not np.issubdtype(np.asarray(t).dtype, np.integer)
            else np.asarray(t, np.int64)
        )
        if t.size == 0:
            return
        self.parts.setdefault(kind, []).append((t, cols))

    def merged(self):
        out = {}
        for kind, parts in self.parts.items():
            t = np.concatenate([p[0] for p in parts])
            names = set().union(*(p[1] for p in parts))
            cols = {}
            for name in names:
                cols[name] = np.concatenate([np.broadcast_to(p[1][name], p[0].shape) for p in parts])
            out[kind] = (t, cols)
        return out


def _order_flow(rng, batch, uni, n, t0, t1, state):
    """``n`` order messages between ``t0`` and ``t1`` (ns), every reference live when named.

    Orders form chains: an add (A or F), then replaces (each U ends one order and starts the
    next with a new reference), ending in a delete, a full execution, or still on the book.
    Executions (E, C) and cancels (X) of part of an order fall inside its life.
    """
    counts = {k: int(round(v / sum(ORDER_MIX.values()) * n)) for k, v in ORDER_MIX.items()}
    roots = max(counts["A"] + counts["F"], 1)
    n_u, n_d = counts["U"], min(counts["D"], roots)
    n_full = min(counts["E"] // 3, roots - n_d)  # a third of the executions fill the rest of an order
    replaces = np.bincount(rng.integers(0, roots, n_u), minlength=roots)
    chain_len = replaces + 1
    n_inst = int(chain_len.sum())
    root_of = np.repeat(np.arange(roots), chain_len)
    first = np.concatenate([[0], np.cumsum(chain_len)[:-1]])
    last = first + chain_len - 1
    # times: a chain starts uniformly in the slice; lives are log-normal (median 0.2 s), squeezed into the slice
    start = rng.integers(int(t0), int(t1), roots)
    life = np.exp(rng.normal(np.log(2e8), 2.0, n_inst)) + 1e3
    span = np.add.reduceat(life, first)
    squeeze = np.minimum(1.0, (t1 - start) * 0.999 / span)
    # whole nanoseconds, at least 2, so every part of an order's life has a time of its own
    life = np.maximum((life * squeeze[root_of]).astype(np.int64), 2)
    offset = np.cumsum(life) - life
    created = start[root_of] + offset - offset[first][root_of]
    ended = created + life
    # what each chain is: stock, side, A or F
    stock = uni.pick(rng, roots)
    side = np.where(rng.random(roots) < 0.5, b"B", b"S")
    is_f = np.zeros(roots, bool)
    is_f[rng.permutation(roots)[: counts["F"]]] = True
    shares = np.where(rng.random(n_inst) < 0.85, rng.integers(1, 11, n_inst) * 100, rng.integers(2, 100, n_inst))
    # bids below the symbol's price, offers above: the books never cross
    away = (1 + np.abs(np.rint(rng.normal(0.0, 15.0, n_inst))).astype(np.int64)) * 100
    price = np.maximum(uni.price[stock[root_of]] + np.where(side[root_of] == b"B", -away, away), 100)
    # how chains end
    order = rng.permutation(roots)
    ends_d, ends_full = order[:n_d], order[n_d : n_d + n_full]
    # partial events on distinct orders that are not the last of a fully executed chain
    n_part = {"E": counts["E"] - n_full, "X": counts["X"], "C": counts["C"]}
    candidates = np.ones(n_inst, bool)
    candidates[last[ends_full]] = False
    pool = rng.permutation(np.flatnonzero(candidates))[: sum(n_part.values())]
    taken = np.zeros(n_inst, np.int64)
    cut = 0
    parts = {}
    for kind in ("E", "X", "C"):
        inst = pool[cut : cut + n_part[kind]]
        cut += len(inst)
        qty = rng.integers(1, shares[inst])  # fewer than the order has
        taken[inst] = qty
        when = created[inst] + 1 + rng.integers(0, life[inst] - 1)  # strictly inside its life
        parts[kind] = (inst, qty, when)
    # references are given in the order the orders appear, once the slice is sorted (_layout):
    # the messages carry instance numbers, _new for the order they start, _old for the one they name
    batch.instances = n_inst
    roots_at = first
    attrs = np.array(MPIDS, "S4")[rng.integers(0, len(MPIDS), roots)]
    for kind, mask in (("A", ~is_f), ("F", is_f)):
        r = np.flatnonzero(mask)
        inst = roots_at[r]
        cols = dict(
            stock_locate=stock[r] + 1,
            _new=inst,
            buy_sell_indicator=side[r],
            shares=shares[inst],
            stock=uni.stock[stock[r]],
            price=price[inst],
        )
        if kind == "F":
            cols["attribution"] = attrs[r]
        batch.add(kind, created[inst], **cols)
    # replaces: the order before ends where the next begins
    nxt = np.flatnonzero(np.isin(np.arange(n_inst), first, invert=True))
    prev = nxt - 1
    batch.add(
        "U",
        created[nxt],
        stock_locate=stock[root_of[nxt]] + 1,
        _old=prev,
        _new=nxt,
        shares=shares[nxt],
        price=price[nxt],
    )
    d_inst = last[ends_d]
    batch.add("D", ended[d_inst], stock_locate=stock[ends_d] + 1, _old=d_inst)
    f_inst = last[ends_full]
    inst, qty, when = parts["E"]
    e_inst = np.concatenate([inst, f_inst])
    batch.add(
        "E",
        np.concatenate([when, ended[f_inst]]),
        stock_locate=stock[root_of[e_inst]] + 1,
        _old=e_inst,
        executed_shares=np.concatenate([qty, shares[f_inst]]),
        match_number=0,
    )
    inst, qty, when = parts["X"]
    batch.add("X", when, stock_locate=stock[root_of[inst]] + 1, _old=inst, cancelled_shares=qty)
    inst, qty, when = parts["C"]
    batch.add(
        "C",
        when,
        stock_locate=stock[root_of[inst]] + 1,
        _old=inst,
        executed_shares=qty,
        match_number=0,
        printable=np.where(rng.random(len(inst)) < 0.9, b"Y", b"N"),
        execution_price=np.maximum(price[inst] + rng.integers(-3, 4, len(inst)) * 100, 100),
    )
    # trades against non-displayed orders: no reference (0) and side 'B', as NASDAQ sends them
    k = counts["P"]
    s = uni.pick(rng, k)
    batch.add(
        "P",
        rng.uniform(t0, t1, k),
        stock_locate=s + 1,
        order_reference_number=0,
        buy_sell_indicator=b"B",
        shares=rng.integers(1, 20, k) * 100,
        stock=uni.stock[s],
        price=uni.near(rng, s, 5),
        match_number=0,
    )


def _admin(rng, uni, n_total):
    """The day's messages other than the order flow, as a Batch (times in ns)."""
    b = Batch()
    n = uni.n
    loc = np.arange(1, n + 1)
    t_open, t_close = 9.5 * HOUR, 16 * HOUR
    events = [
        (3 * HOUR + 7 * MINUTE, b"O"),
        (4 * HOUR, b"S"),
        (t_open, b"Q"),
        (t_close, b"M"),
        (20 * HOUR, b"E"),
        (20 * HOUR + 5 * MINUTE, b"C"),
    ]
    b.add("S", [t for t, _ in events], stock_locate=0, event_code=np.array([c for _, c in events]))
    morning = 3 * HOUR + 8 * MINUTE
    step = 50 * MINUTE / (6 * n + 10)  # the directory and its companions, before 04:00
    b.add(
        "V",
        [morning],
        stock_locate=0,
        level_1=int(3_700.1234 * 10**8),
        level_2=int(3_500.5 * 10**8),
        level_3=int(3_200 * 10**8),
    )
    t = morning + step * (1 + np.arange(n))
    etf = rng.random(n) < 0.2
    b.add(
        "R",
        t,
        stock_locate=loc,
        stock=uni.stock,
        market_category=np.array([b"Q", b"G", b"S", b"N", b"P", b"Z"])[rng.integers(0, 6, n)],
        financial_status_indicator=b"N",
        round_lot_size=100,
        round_lots_only=b"N",
        issue_classification=np.where(etf, b"Q", b"C"),
        issue_sub_type=np.where(etf, b"I ", b"Z "),
        authenticity=b"P",
        short_sale_threshold_indicator=b"N",
        ipo_flag=b" ",
        luld_reference_price_tier=np.where(rng.random(n) < 0.15, b"1", b"2"),
        etp_flag=np.where(etf, b"Y", b"N"),
        etp_leverage_factor=np.where(etf, rng.integers(1, 4, n), 0),
        inverse_indicator=b"N",
    )
    b.add("H", t + step * n, stock_locate=loc, stock=uni.stock, trading_state=b"T", reserved=b" ", reason=b"    ")
    b.add("Y", t + 2 * step * n, stock_locate=loc, stock=uni.stock, reg_sho_action=b"0")
    mm = np.repeat(loc, 2)
    b.add(
        "L",
        morning + step * (3 * n + 1 + np.arange(2 * n)),
        stock_locate=mm,
        stock=uni.stock[mm - 1],
        mpid=np.array(MPIDS, "S4")[rng.integers(0, len(MPIDS), 2 * n)],
        primary_market_maker=np.where(rng.random(2 * n) < 0.1, b"Y", b"N"),
        market_maker_mode=b"N",
        market_participant_state=b"A",
    )
    # crosses at the open and the close, one per symbol
    for when, kind in ((t_open, b"O"), (t_close, b"C")):
        b.add(
            "Q",
            when + rng.uniform(1e6, 2e8, n),
            stock_locate=loc,
            shares=rng.integers(1, 5000, n) * 100,
            stock=uni.stock,
            cross_price=uni.near(rng, loc - 1, 3),
            match_number=0,
            cross_type=kind,
        )
    # NOII: the last 5 minutes before the open and the last 10 before the close, 1.5 % of the day
    k = max(int(NOII_SHARE * n_total), 1)
    s = uni.pick(rng, k)
    when = np.where(
        rng.random(k) < 0.3, rng.uniform(t_open - 5 * MINUTE, t_open, k), rng.uniform(t_close - 10 * MINUTE, t_close, k)
    )
    ref_px = uni.near(rng, s, 3)
    b.add(
        "I",
        when,
        stock_locate=s + 1,
        paired_shares=rng.integers(0, 10**6, k),
        imbalance_shares=rng.integers(0, 10**5, k),
        imbalance_direction=np.array([b"B", b"S", b"N", b"O"])[rng.integers(0, 4, k)],
        stock=uni.stock[s],
        far_price=ref_px,
        near_price=ref_px,
        current_reference_price=ref_px,
        cross_type=np.where(when < t_open, b"O", b"C"),
        price_variation_indicator=np.array(list(b"L123456789ABC "), "S1")[rng.integers(0, 14, k)],
    )
    # the rare ones: a few each
    few = max(2, n // 500)
    s = rng.integers(0, n, few)
    halt = rng.uniform(10 * HOUR, 15 * HOUR, few)
    b.add(
        "H",
        np.concatenate([halt, halt + 5 * MINUTE]),
        stock_locate=np.tile(s + 1, 2),
        stock=np.tile(uni.stock[s], 2),
        trading_state=np.repeat([b"H", b"T"], few),
        reserved=b" ",
        reason=np.repeat([b"LUDP", b"    "], few),
    )
    b.add(
        "J",
        halt + 4 * MINUTE,
        stock_locate=s + 1,
        stock=uni.stock[s],
        auction_collar_reference_price=uni.price[s],
        upper_auction_collar_price=uni.price[s] * 105 // 100 // 100 * 100,
        lower_auction_collar_price=uni.price[s] * 95 // 100 // 100 * 100,
        auction_collar_extension=0,
    )
    b.add(
        "Q",
        halt + 5 * MINUTE + 1e5,
        stock_locate=s + 1,
        shares=rng.integers(1, 100, few) * 100,
        stock=uni.stock[s],
        cross_price=uni.price[s],
        match_number=0,
        cross_type=b"H",
    )
    s = rng.integers(0, n, 2)
    t = rng.uniform(11 * HOUR, 14 * HOUR, 2)
    b.add(
        "h",
        np.concatenate([t, t + MINUTE]),
        stock_locate=np.tile(s + 1, 2),
        stock=np.tile(uni.stock[s], 2),
        market_code=b"Q",
        operational_halt_action=np.repeat([b"H", b"T"], 2),
    )
    s = rng.integers(0, n, 1)
    b.add(
        "K",
        [7 * HOUR],
        stock_locate=s + 1,
        stock=uni.stock[s],
        ipo_quotation_release_time=11 * 3600,
        ipo_quotation_release_qualifier=b"A",
        ipo_price=uni.price[s],
    )
    b.add(
        "O",
        9.5 * HOUR + rng.uniform(1e9, 3e9, 3),
        stock_locate=s + 1,
        stock=uni.stock[s],
        open_eligibility_status=np.array([b"N", b"N", b"Y"]),
        minimum_allowable_price=uni.price[s] * 8 // 10,
        maximum_allowable_price=uni.price[s] * 12 // 10,
        near_execution_price=uni.price[s],
        near_execution_time=int(9.5 * HOUR + 4 * 10**9),
        lower_price_range_collar=uni.price[s] * 9 // 10,
        upper_price_range_collar=uni.price[s] * 11 // 10,
    )
    k = max(1, n // 50)
    s = rng.integers(0, n, k)
    b.add(
        "N",
        rng.uniform(9.4 * HOUR, 15.9 * HOUR, k),
        stock_locate=s + 1,
        stock=uni.stock[s],
        interest_flag=np.array([b"B", b"S", b"A", b"N"])[rng.integers(0, 4, k)],
    )
    b.add("W", [rng.uniform(12 * HOUR, 13 * HOUR)], stock_locate=0, breached_level=b"1")
    k = max(1, n // 1000)
    s = rng.integers(0, n, k)
    b.add("B", rng.uniform(13 * HOUR, 17 * HOUR, k), stock_locate=s + 1, match_number=0)
    return b


def _split(batch, lo, hi):
    """The part of ``batch`` (a merged dict) with times in [lo, hi)."""
    out = Batch()
    for kind, (t, cols) in batch.items():
        m = (t >= lo) & (t < hi)
        if m.any():
            out.add(kind, t[m], **{c: v[m] if np.ndim(v) else v for c, v in cols.items()})
    return out


def _time_order(t):
    """The permutation that sorts ``t``: no two messages of one order share a nanosecond, so any
    sort will do. A sort of (time, index) packed in one int64 is twice as fast as an argsort."""
    bits = max(int(len(t)).bit_length(), 1)
    lo = int(t.min())
    if int(t.max()) - lo >= 1 << (63 - bits):
        return np.argsort(t)
    key = ((t - lo) << bits) | np.arange(len(t))
    key.sort()
    return key & ((1 << bits) - 1)


def _among(kind, letters):
    """A mask of the messages whose type is one of ``letters``."""
    lut = np.zeros(len(TYPES), bool)
    lut[[TYPES.index(k) for k in letters]] = True
    return lut[kind]


def _layout(parts, instances, state, rng):
    """The framed bytes of one slice's messages, sorted by time (uint8 array)."""
    kinds, times, rows = [], [], []
    for kind, (t, _) in parts.items():
        kinds.append(np.full(len(t), TYPES.index(kind), np.uint8))
        times.append(t)
        rows.append(np.arange(len(t)))
    kind = np.concatenate(kinds)
    t = np.concatenate(times)
    row = np.concatenate(rows)
    order = _time_order(t)
    kind, ts, row = kind[order], t[order], row[order]
    ts = np.maximum(ts, state["ts"])  # never before the previous slice's last message
    state["ts"] = int(ts[-1])
    n = len(kind)
    # match numbers: increasing over the day on E, C, P, Q; a B breaks an earlier one
    has_match = _among(kind, "ECPQ")
    seen = state["match"] + np.cumsum(has_match)  # the last match number given so far
    match = np.where(has_match, seen, 0)
    state["match"] = int(seen[-1])
    is_b = kind == TYPES.index("B")
    if is_b.any():
        match[is_b] = rng.integers(1, np.maximum(seen[is_b], 1) + 1)
    # order references: numbered in the order the A, F and U messages that start the orders come
    ref_of = np.zeros(max(instances, 1), np.int64)
    starts = np.flatnonzero(_among(kind, "AFU"))
    new_inst = np.empty(len(starts), np.int64)
    for k in "AFU":
        if k in parts:
            m = kind[starts] == TYPES.index(k)
            new_inst[m] = parts[k][1]["_new"][row[starts[m]]]
    ref_of[new_inst] = state["ref"] + np.arange(1, len(starts) + 1)
    state["ref"] += len(starts)
    sizes = SIZES[kind]
    pos = np.cumsum(sizes) - sizes  # each message's first byte in the slice
    out = np.empty(int(pos[-1] + sizes[-1]), np.uint8)
    by_kind = np.argsort(kind, kind="stable")  # a counting sort: each type's rows in stream order
    bounds = np.concatenate([[0], np.cumsum(np.bincount(kind, minlength=len(TYPES)))])
    for kind_name, (_, cols) in parts.items():
        code = TYPES.index(kind_name)
        where = by_kind[bounds[code] : bounds[code + 1]]
        rec = _records(kind_name, cols, row[where], ts[where], match[where], ref_of, rng)
        _place(out, pos[where], rec.view(np.uint8), rec.dtype.itemsize)
    return out, n


@numba.njit(nogil=True)
def _place(out, pos, rec, size):
    """Record ``i`` of ``rec`` (packed, ``size`` bytes each) to ``out[pos[i]:]``: each
    message's bytes straight to their place in the stream (every byte of ``out`` is some
    message's: the positions tile it)."""
    for i in range(pos.shape[0]):
        p, s = pos[i], i * size
        for k in range(size):
            out[p + k] = rec[s + k]


def _records(kind, cols, rows, ts, match, ref_of, rng):
    """The records of one type, in their stream order, as its structured array."""
    dt = DTYPES[kind]
    rec = np.zeros(len(rows), dt)
    for name, code in BODY[kind]:
        if code.startswith("S") and name not in cols:
            rec[name] = b" " * int(code[1:])
    rec["length"] = LENGTH[kind]
    rec["message_type"] = kind.encode()
    rec["tracking_number"] = rng.integers(0, 8, len(rows))
    rec["timestamp_high"] = ts >> 32
    rec["timestamp_low"] = ts & 0xFFFFFFFF
    for name, v in cols.items():
        if name == "_new":
            rec["new_order_reference_number" if kind == "U" else "order_reference_number"] = ref_of[v[rows]]
        elif name == "_old":
            rec["original_order_reference_number" if kind == "U" else "order_reference_number"] = ref_of[v[rows]]
        else:
            rec[name] = v[rows] if np.ndim(v) else v
    if "match_number" in dt.names:
        rec["match_number"] = match
    return rec


def generate(size, seed=0, slice_messages=1 << 18):
    """Yield the day's bytes (uint8 arrays, one per slice) for a file of about ``size`` bytes.

    The same ``size`` and ``seed`` give the same bytes.
    """
    rng = np.random.default_rng(seed)
    mean = sum(ORDER_MIX[k] * (LENGTH[k] + 2) for k in ORDER_MIX) / sum(ORDER_MIX.values())
    n_total = max(int(size / mean), 200)
    n_symbols = int(np.clip(n_total // MESSAGES_PER_SYMBOL, 8, MAX_SYMBOLS))
    uni = Universe(rng, n_symbols)
    admin = _admin(rng, uni, n_total).merged()
    admin_bytes = sum(len(t) * (LENGTH[k] + 2) for k, (t, _) in admin.items())
    n_flow = max(int((size - admin_bytes) / mean), 100)
    slices = max(1, -(-n_flow // slice_messages))
    grid_t, grid_cdf = _intensity_cdf()
    bounds = np.interp(np.linspace(0, 1, slices + 1), grid_cdf, grid_t)
    state = {"ref": 0, "match": 0, "ts": 0}
    per = np.diff(np.linspace(0, n_flow, slices + 1).astype(np.int64))
    for k in range(slices):
        t0, t1 = bounds[k], bounds[k + 1]
        lo = 0.0 if k == 0 else t0
        hi = float(DAY_NS) if k == slices - 1 else t1
        batch = _split(admin, lo, hi)
        _order_flow(rng, batch, uni, int(per[k]), t0, t1, state)
        out, _ = _layout(batch.merged(), batch.instances, state, rng)
        yield out


def day_bytes(size, seed=0, slice_messages=1 << 18):
    """The whole day in memory (a uint8 array): for tests and small files."""
    return np.concatenate(list(generate(size, seed, slice_messages)))


def parse_size(text):
    """'4GB', '500MB', '64KiB', '1e9' -> bytes."""
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMGT]?)(i?)B?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected a number with an optional unit (4GB, 500MB)")
    base = 1024 if m.group(3) else 1000
    return int(float(m.group(1)) * base ** " KMGT".index(m.group(2) or " "))


def _available():
    """Bytes of memory available (Linux ``MemAvailable``), or None where it cannot be told."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


# a read holds about this many times the file: measured 13.8 GB at most resident for a 2.2 GB
# day (the mapped file, the copy's buffer, a read's index and tables), 2026-12-01
READ_MEMORY = 6.5


def read_day(path, rounds):
    """``read_stream(path, "itch50")`` of a day file (memory-mapped) against ``np.copyto`` of
    its bytes into a reused buffer, rounds interleaved; medians (seconds) and the load."""
    import layouts as lo

    from .streams import interleaved

    spec = lo.Stream.builtin("itch50")
    lo.read_stream(day_bytes(200_000, seed=1), spec)  # compile / load outside the timing
    src = np.memmap(path, np.uint8, "r")
    dst = np.empty_like(src)
    tables = lo.read_stream(path, spec)
    messages = sum(len(t) for name, t in tables.items() if not name.startswith("_"))
    del tables
    read_s, copy_s = interleaved([lambda: lo.read_stream(path, spec), lambda: np.copyto(dst, src)], rounds)
    return {
        "bytes": int(src.nbytes),
        "messages": messages,
        "read_s": read_s,
        "copy_s": copy_s,
        "loadavg": os.getloadavg(),
    }


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.itch_day",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--size", type=parse_size, default=parse_size("4GB"), help="about this many bytes (default 4GB)")
    p.add_argument("--out", required=True, help="the file to write (replaced whole: written to OUT.part, renamed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--read",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="then time read_stream(OUT, 'itch50') (memory-mapped) against np.copyto of the same bytes, "
        "ROUNDS interleaved rounds, medians (the streams benchmark's ITCH read, on a day of any size; "
        f"needs about {READ_MEMORY}x the file in available memory)",
    )
    p.add_argument("--reuse", action="store_true", help="with --read: read OUT as it is if it exists (no new day)")
    a = p.parse_args(argv)
    if a.read:
        free = _available()
        if free is not None and free < READ_MEMORY * a.size:
            print(
                f"--read of a {a.size / 1e9:.1f} GB day needs about {READ_MEMORY * a.size / 1e9:.1f} GB of memory; "
                f"{free / 1e9:.1f} GB is available: choose a smaller --size",
                file=sys.stderr,
            )
            return 2
    if not (a.reuse and os.path.exists(a.out)):
        _write(a)
    if a.read:
        r = read_day(a.out, a.read)
        gb = r["bytes"] / 1e9
        print(
            f"{a.out}: {r['bytes']:,} bytes, {r['messages']:,} messages; median of {a.read}: read_stream "
            f"{r['read_s']:.2f} s ({r['messages'] / r['read_s'] / 1e6:.1f} M messages/s, {gb / r['read_s']:.2f} GB/s), "
            f"np.copyto {r['copy_s']:.3f} s ({gb / r['copy_s']:.1f} GB/s): {r['read_s'] / r['copy_s']:.1f}x the copy; "
            f"load {r['loadavg'][0]:.1f}"
        )
    return 0


def _write(a):
    """Write the day to ``a.out`` (whole or not at all) and say how fast it was made."""
    part = a.out + ".part"
    t0, c0 = time.perf_counter(), time.process_time()
    total = 0
    try:
        with open(part, "wb") as f:
            for chunk in generate(a.size, a.seed):
                f.write(chunk.data)
                total += chunk.nbytes
        os.replace(part, a.out)
    except BaseException:
        if os.path.exists(part):
            os.remove(part)
        raise
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"{a.out}: {total:,} bytes in {dt:.1f} s ({total / dt / 1e6:.0f} MB/s; "
        f"{total / cpu / 1e6:.0f} MB/s of CPU; load {os.getloadavg()[0]:.1f})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(main())
