"""The benchmark scripts run at a tiny size and write well-formed JSON (no figures asserted)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# GPU steps in the simulator, with the tests' faster one (tests/simulator_site/sitecustomize.py)
SIMULATED = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "simulator_site"), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    ),
)


@pytest.mark.parametrize(
    "module,extra",
    [
        ("benchmarks.convert_c", []),
        ("benchmarks.convert_files", ["--dir", "{tmp}"]),
        ("benchmarks.convert_files", ["--dir", "{tmp}", "--device", "cuda", "--chunk", "1920"]),  # the simulator here
        ("benchmarks.transpose", ["--dir", "{tmp}", "--file-records", "20000"]),
    ],
)
@pytest.mark.slow
def test_benchmark_runs_small(module, extra, tmp_path):
    out = tmp_path / "result.json"
    args = [a.format(tmp=tmp_path) for a in extra]
    records = "96" if "cuda" in extra else "20000"  # the simulator: 96 records, 3 chunks
    run = subprocess.run(
        [sys.executable, "-m", module, "--records", records, "--repeat", "1", "--json", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=SIMULATED if "cuda" in extra else None,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["records"] == int(records) and result["machine"]["cores"] >= 1
    assert all(row["GB/s"] > 0 for row in result["rows"])
    assert not list(tmp_path.glob("layouts-bench*"))  # the benchmark cleans up after itself


@pytest.mark.slow
def test_dask_scale_runs_small(tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "result.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.dask_scale",
            "--records",
            "40000",
            "--repeat",
            "1",
            "--blocksize",
            "256KiB",
            "--dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert [r["workers"] for r in result["rows"]] == [0, 1, 1, 2, 2]
    assert all(r["seconds"] > 0 for r in result["rows"]) and "speedup" in result["rows"][3]
    assert not list(tmp_path.glob("layouts-dask-bench*"))


@pytest.mark.slow
def test_layouts_bench_writes_tables_json_and_png(tmp_path, capsys):
    from layouts._cli import main
    from layouts.benchmarks.reductions import FIELDS, OPS

    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    assert (
        main(
            [
                "bench",
                "--records",
                "3000",
                "--repeat",
                "1",
                "--itemsizes",
                "16,64",
                "--cpu-only",
                "--json",
                str(out),
                "--plot",
                str(png),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "| cpu | 64 | f8 | sum |" in text and "Break-even" in text and f"wrote {png}" in text
    result = json.loads(out.read_text())
    assert result["machine"]["cores"] >= 1 and result["machine"]["gpu"] is None and result["date"]
    methods = {(r["layout"], r["method"]) for r in result["rows"]}
    assert {("AoS", "numpy"), ("AoS", "kernel"), ("SoA", "numpy"), ("SoA", "kernel"), ("SoA", "pyarrow")} <= methods
    assert len(result["rows"]) == 2 * len(FIELDS) * len(OPS) * len(methods)
    assert all(r["useful GB/s"] > 0 and r["touched GB/s"] >= r["useful GB/s"] for r in result["rows"])
    assert len(result["ratios"]) == 2 * len(FIELDS) * len(OPS)
    assert {(b["itemsize"], b["field"]) for b in result["break_even"]} == {
        (s, f) for s in (16, 64) for f in FIELDS.values()
    }
    assert all(
        b["reductions to break even"] is None or b["reductions to break even"] >= 1 for b in result["break_even"]
    )
    assert {c["method"] for c in result["conversions"]} == {
        "np.copy (ceiling)",
        "layouts to_soa().to_arrow()",
        "numpy per-field ascontiguousarray",
    }
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_layouts_bench_options(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "layouts", "bench", "--itemsizes", "10,20"], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 2 and "--itemsizes takes record sizes that are multiples of 16" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "layouts", "bench", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0 and "--full" in run.stdout


@pytest.mark.slow  # (the fast loop keeps a lighter one of its kind)
def test_convert_files_from_the_disk_needs_root(tmp_path):
    out = tmp_path / "result.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.convert_files",
            "--records",
            "20000",
            "--repeat",
            "1",
            "--cold",
            "--dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if sys.platform.startswith("linux") and os.geteuid() == 0:  # drops the page cache for real
        assert run.returncode == 0, run.stderr
        result = json.loads(out.read_text())
        assert result["cold"] is True and all(row["GB/s"] > 0 for row in result["rows"])
        assert "from the disk" in run.stdout
    else:
        assert run.returncode != 0 and "needs root" in run.stderr and not out.exists()
    assert not list(tmp_path.glob("layouts-bench*"))


@pytest.mark.slow
def test_block_reservation_benchmark_runs_small(tmp_path):
    out = tmp_path / "result.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.block_reservation",
            "--records",
            "20000",
            "--repeat",
            "2",
            "--dir",
            str(tmp_path),
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert [r["name"] for r in result["rows"]] == ["write the bytes to a new file", "convert -> arrow (overlapped)"]
    assert all(r["GB/s reserved"] > 0 and r["GB/s not reserved"] > 0 and r["x"] > 0 for r in result["rows"])
    assert not list(tmp_path.glob("layouts-reserve*"))


@pytest.mark.slow
def test_gpu_suite_runs_small_in_the_simulator(tmp_path):
    """The one command for a lent GPU runs end to end (here every GPU step in Numba's
    simulator, at tiny sizes) and writes one JSON with every step's result."""
    run = subprocess.run(  # the sm_90 report and the cuda tests have tests of their own (test_cuda.py)
        [
            sys.executable,
            "-m",
            "benchmarks.gpu_suite",
            "--small",
            "--out",
            str(tmp_path),
            "--skip",
            "cuda tests",
            "--skip",
            "kernel resources",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=SIMULATED,
    )
    (path,) = tmp_path.glob("gpu-suite-*.json")
    result = json.loads(path.read_text())
    steps = {s["name"]: s for s in result["steps"]}
    assert run.returncode == 0, [(s["name"], s["exit"], s["output_tail"][-500:]) for s in result["steps"]]
    assert result["small"] and result["date"] and "gpu" in result["machine"]
    assert steps["kernel resources (sm_90)"]["exit"] == steps["cuda tests"]["exit"] == "skipped"
    assert steps["convert --device cuda, overlapped and serial"]["result"]["device"] == "cuda"
    assert steps["reductions (CPU and GPU)"]["result"]["rows"]
    scan = steps["record streams: CPU scan vs copy to the GPU"]["result"]["itch"][0]
    assert scan["scan_s"] > 0 and scan["h2d_used_s"] > 0 and scan["messages"] > 0
