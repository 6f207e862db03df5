"""The reduction suite's report: tables on stdout, JSON with the machine, a PNG plot."""

__all__ = ["tables", "save_json", "plot"]

import json

from .reductions import FIELDS

WIDTH_OF = {name: label for label, name in FIELDS.items()}


def tables(result):
    """The report as Markdown tables (one string)."""
    lines = [
        f"{result['records']:,} records per shape, median of {result['repeat']}; "
        f"{result['machine']['cpu']}, {result['machine']['cores']} cores"
        + (f", {result['machine']['gpu']}" if result["machine"].get("gpu") else ", no GPU"),
        "",
    ]
    lines += [
        "Reductions, fastest method per layout (useful GB/s = records x field width / time; AoS/SoA = time ratio):",
        "",
        "| device | record B | field | op | AoS method | AoS GB/s | SoA method | SoA GB/s | AoS/SoA |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = result["rows"]
    for r in result["ratios"]:
        aos = _row(rows, r, "AoS")
        soa = _row(rows, r, "SoA")
        lines.append(
            f"| {r['device']} | {r['itemsize']} | {WIDTH_OF[r['field']]} | {r['op']} | {r['AoS method']} | "
            f"{aos['useful GB/s']:.2f} | {r['SoA method']} | {soa['useful GB/s']:.2f} | {r['AoS/SoA']:.1f}x |"
        )
    lines += [
        "",
        "Conversion (record bytes / time; x copy = against np.copy of the same bytes, same run):",
        "",
        "| device | record B | method | GB/s | x copy |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in result["conversions"]:
        x = f"{c['x_copy']:.2f}" if "x_copy" in c else ""
        lines.append(f"| {c['device']} | {c['itemsize']} | {c['method']} | {c['GB/s']:.2f} | {x} |")
    lines += [
        "",
        "Break-even: reductions over one column after which converting to SoA first pays "
        "(mean over sum, mean, min, max, count>x):",
        "",
        "| device | record B | " + " | ".join(f"{w} field" for w in FIELDS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in FIELDS) + " |",
    ]
    for device, itemsize in sorted({(b["device"], b["itemsize"]) for b in result["break_even"]}):
        cells = []
        for name in FIELDS.values():
            hit = [
                b for b in result["break_even"] if (b["device"], b["itemsize"], b["field"]) == (device, itemsize, name)
            ]
            k = hit[0]["reductions to break even"] if hit else None
            cells.append("never" if k is None else str(k))
        lines.append(f"| {device} | {itemsize} | " + " | ".join(cells) + " |")
    if result["cpu_vs_gpu"]:
        lines += [
            "",
            "Sum of the 8-byte field, CPU vs GPU at equal work (data on the host for 'with transfer'):",
            "",
            "| record B | layout | CPU s | GPU s | GPU s with transfer | speed-up | with transfer |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for c in result["cpu_vs_gpu"]:
            lines.append(
                f"| {c['itemsize']} | {c['layout']} | {c['cpu s']:.5f} | {c['gpu s']:.5f} | "
                f"{c['gpu + transfer s']:.5f} | {c['gpu speed-up']:.1f}x | {c['gpu speed-up with transfer']:.2f}x |"
            )
    return "\n".join(lines)


def _row(rows, key, layout):
    method = key[f"{layout} method"]
    return next(
        r
        for r in rows
        if r["layout"] == layout
        and r["method"] == method
        and all(r[k] == key[k] for k in ("device", "itemsize", "field", "op"))
    )


def save_json(result, path):
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def plot(result, path):
    """Throughput vs record size per field width (AoS vs SoA, CPU vs GPU) and the
    break-even, as a PNG. Needs matplotlib (the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 9), constrained_layout=True)
    axes = axes.ravel()
    sizes = sorted({r["itemsize"] for r in rows})
    methods = sorted({(r["device"], r["layout"], r["method"]) for r in rows})
    for ax, (label, name) in zip(axes, FIELDS.items()):
        for device, layout, method in methods:
            points = sorted(
                (r["itemsize"], r["useful GB/s"])
                for r in rows
                if (r["device"], r["layout"], r["method"], r["field"], r["op"]) == (device, layout, method, name, "sum")
            )
            if points:
                style = "-" if layout == "SoA" else "--"
                ax.plot(*zip(*points), style, marker="o", label=f"{device} {layout} {method}")
        ax.set(yscale="log", ylabel="useful GB/s (sum)", title=f"sum over the {label} field")
        _size_axis(ax, sizes)
    axes[0].legend(fontsize=7)
    ax = axes[-1]
    for device in sorted({b["device"] for b in result["break_even"]}):
        for label, name in FIELDS.items():
            points = sorted(
                (b["itemsize"], b["reductions to break even"])
                for b in result["break_even"]
                if b["device"] == device and b["field"] == name and b["reductions to break even"]
            )
            if points:
                ax.plot(*zip(*points), marker="o", label=f"{device}, {label} field")
    ax.set(ylabel="reductions (mean over the ops)", title="reductions over a column to pay for to_soa")
    ax.set_ylim(bottom=0)
    _size_axis(ax, sizes)
    ax.legend(fontsize=7)
    machine = result["machine"]
    fig.suptitle(
        f"layouts: reductions AoS vs SoA, {result['records']:,} records; {result['date'][:10]}, "
        f"{machine['cpu']} ({machine['cores']} cores){', ' + machine['gpu'] if machine.get('gpu') else ''}",
        fontsize=10,
    )
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _size_axis(ax, sizes):
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("record size (bytes)")
    ax.grid(True, which="both", alpha=0.3)
