"""The benchmark scripts run at a tiny size and write well-formed JSON (no figures asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module,extra", [
    ("benchmarks.convert_c", []),
    ("benchmarks.convert_files", ["--dir", "{tmp}"]),
])
def test_benchmark_runs_small(module, extra, tmp_path):
    out = tmp_path / "result.json"
    args = [a.format(tmp=tmp_path) for a in extra]
    run = subprocess.run([sys.executable, "-m", module, "--records", "20000", "--repeat", "1", "--json", str(out),
                          *args], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["records"] == 20000 and result["machine"]["cores"] >= 1
    assert all(row["GB/s"] > 0 for row in result["rows"])
    assert not list(tmp_path.glob("layouts-bench*"))  # the benchmark cleans up after itself
