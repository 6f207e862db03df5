import subprocess
import sys

from layouts._cli import main


def test_demo_runs_and_round_trips(capsys):
    assert main(["demo", "--records", "2000"]) == 0
    out = capsys.readouterr().out
    assert "struct tick: 48 bytes per record" in out and "44:1  7 bits  venue" in out
    assert "records -> Parquet: 2,000 records" in out and "qty nulls: 40; round trip bit-exact: True" in out


def test_module_entry_point_and_bad_argument():
    run = subprocess.run([sys.executable, "-m", "layouts", "demo", "--records", "-3"], capture_output=True, text=True)
    assert run.returncode == 2 and "--records must be >= 0, got -3" in run.stderr
