"""benchmarks.streams runs (its --small smoke mode) and its synthetic ITCH file is valid."""

import numpy as np

import layouts as lo
from layouts.benchmarks import streams


def test_synthetic_itch_file_has_the_mix_and_reads():
    buf, n = streams.itch_bytes(0.2)
    t = lo.read_stream(buf, "itch50")
    counts = {name: len(v) for name, v in t.items()}
    assert sum(counts.values()) == n
    # mostly add order / delete / replace / executed / cancel / trade
    assert (
        sum(
            counts[k] for k in ("add_order", "order_delete", "order_replace", "order_executed", "order_cancel", "trade")
        )
        > 0.9 * n
    )
    assert lo.write_stream(t, "itch50") == buf.tobytes()


def test_synthetic_pcap_reads():
    raw = streams.pcap_bytes(50)
    t = lo.read_stream(raw, "pcap")
    lens = t["packet"]["incl_len"].to_numpy()
    assert len(lens) == 50 and np.all((lens >= 60) & (lens <= 1514))


def test_benchmark_small_runs(capsys):
    result = streams.main(["--small"])
    out = capsys.readouterr().out
    assert "read_stream -> 23 tables" in out and "np.copyto" in out
    assert result["messages"] > 0 and result["read_s"] > 0 and result["copy_s"] > 0
    assert "dpkt.pcap.Reader" in out and result["pcap_dpkt_s"] > 0
