"""The command for a newcomer (issue 25): bare ``layouts`` shows the help, usage errors exit
2 and name the unknown option first, every column problem of an Arrow input comes with the
full set of flags, the way back writes the header, small files show real figures."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from layouts._cli import main

DTYPE = "[('ts_ns', '<i8'), ('qty', '<i4')]"


def run(capsys, *argv):
    rc = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def pandas_file(tmp_path):
    """A Parquet file as pandas writes it: microsecond timestamps, nullable ints, extra columns."""
    pq.write_table(
        pa.table(
            {
                "ts_ns": pa.array([0, 1500], pa.timestamp("us")),
                "qty": pa.array([5, None], pa.int32()),
                "px": ["1.5", "2"],
                "note": ["a", "b"],
            }
        ),
        tmp_path / "p.parquet",
    )
    return tmp_path


def test_bare_layouts_shows_the_help(capsys):
    rc, out, err = run(capsys)
    assert rc == 0 and err == "" and out.startswith("usage: layouts") and "convert" in out and "inspect" in out


def test_an_unknown_option_is_named_before_missing_arguments():
    run = subprocess.run([sys.executable, "-m", "layouts", "convert", "--bogus"], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr == ("layouts convert: error: unrecognized arguments: --bogus (see layouts convert --help)\n")


def test_known_options_are_not_taken_for_unknown_ones(capsys):
    with pytest.raises(SystemExit) as caught:  # -I with its directory attached, a negative number: known
        main(["convert", "-I/usr/include", "x.bin", "--struct", "h", "--offset", "-1"])
    assert caught.value.code == 2
    # the negative number reaches --offset's own check (not "unrecognized arguments: -1")
    assert capsys.readouterr().err == (
        "layouts convert: error: argument --offset: -1 is negative: give the bytes of "
        "header before the first record, 0 or more (see layouts convert --help)\n"
    )


def test_usage_errors_exit_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as caught:  # argparse's errors leave main() as SystemExit
        main(["convert", "x.bin"])
    assert caught.value.code == 2
    assert "the following arguments are required: --to" in capsys.readouterr().err
    (tmp_path / "a.bin").write_bytes(bytes(8))
    rc, _, err = run(capsys, "convert", tmp_path / "a.bin", "--dtype", "[('a', '<i4')]", "--to", tmp_path / "a.csv")
    assert rc == 2 and "cannot tell the output format of" in err
    rc, _, err = run(capsys, "demo", "--records", "0")
    assert rc == 2 and "--records must be >= 1" in err


def test_every_problem_and_every_flag_in_one_line(pandas_file, capsys):
    rc, out, err = run(
        capsys,
        "convert",
        pandas_file / "p.parquet",
        "--dtype",
        "[('ts_ns', '<i8'), ('qty', '<i4'), ('px', '<f8')]",
        "--to",
        pandas_file / "p.bin",
    )
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("layouts convert: error: ") and "4 problems with the Arrow data's columns" in err
    assert "pass --drop-extra note to drop it" in err and "pass --time-unit ts_ns=ns to count nanoseconds" in err
    assert err.rstrip().endswith("to convert, add --drop-extra note --time-unit ts_ns=ns --fill qty=VALUE --cast parse")
    assert not (pandas_file / "p.bin").exists()
    rc, out, err = run(
        capsys,
        "convert",
        pandas_file / "p.parquet",
        "--dtype",
        "[('ts_ns', '<i8'), ('qty', '<i4'), ('px', '<f8')]",
        "--to",
        pandas_file / "p.bin",
        "--drop-extra",
        "note",
        "--time-unit",
        "ts_ns=ns",
        "--fill",
        "qty=-1",
        "--cast",
        "parse",
    )
    assert rc == 0 and err == ""
    got = np.fromfile(pandas_file / "p.bin", [("ts_ns", "<i8"), ("qty", "<i4"), ("px", "<f8")])
    assert got.tolist() == [(0, 5, 1.5), (1_500_000, -1, 2.0)]


def test_time_unit_from_the_name_and_a_contradiction_warns(pandas_file, capsys):
    base = ["convert", pandas_file / "p.parquet", "--dtype", DTYPE, "--drop-extra", "note,px", "--fill", "qty=-1"]
    rc, _, err = run(capsys, *base, "--time-unit", "name", "--to", pandas_file / "a.bin")
    assert rc == 0 and err == "" and np.fromfile(pandas_file / "a.bin", "<i8,<i4")["f0"].tolist() == [0, 1_500_000]
    rc, _, err = run(capsys, *base, "--time-unit", "ts_ns=us", "--to", pandas_file / "b.bin")
    assert rc == 0 and err == (
        "layouts convert: warning: --time-unit ts_ns=us gives field 'ts_ns' the unit 'us', but "
        "its name says 'ns': the counts written are microseconds\n"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--to", "{d}/o.bin", "--offset", "16"],
            "--offset 16 skips a header when reading records, but this writes "
            "records from Arrow data, where it would do nothing; to write the "
            "16-byte header before the records, add --header FILE",
        ),
        (
            ["--to", "{d}/o.bin", "--header", "{d}/p.parquet"],
            "--header {d}/p.parquet needs --offset N, the header's size",
        ),
        (
            ["--to", "{d}/o.bin", "--time-unit", "ts_ns=minutes"],
            "--time-unit 'ts_ns=minutes': the unit must be one of s, ms, us, ns or name",
        ),
        (["--to", "{d}/o.bin", "--time-unit", "nope=ns"], "--time-unit nope=ns: 'nope' is not a leaf field"),
    ],
)
def test_way_back_options_are_checked(pandas_file, capsys, argv, message):
    rc, out, err = run(
        capsys, "convert", pandas_file / "p.parquet", "--dtype", DTYPE, *[a.format(d=pandas_file) for a in argv]
    )
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"layouts convert: error: {message.format(d=pandas_file)}"), err


@pytest.mark.parametrize("flag", [["--time-unit", "ns"], ["--drop-extra", "x"], ["--header", "h.bin"]])
def test_way_back_options_are_refused_on_the_way_in(tmp_path, capsys, flag):
    (tmp_path / "r.bin").write_bytes(bytes(24))
    rc, _, err = run(capsys, "convert", tmp_path / "r.bin", "--dtype", DTYPE, "--to", tmp_path / "r.parquet", *flag)
    assert rc == 2 and f"{flag[0]} applies when writing records (Arrow -> records), but this writes parquet" in err


def test_the_header_round_trip(tmp_path, capsys):
    records = np.array([(1, 2), (3, 4)], "<i8,<i4").tobytes()
    (tmp_path / "h.bin").write_bytes(b"HEADER 16 BYTES\n" + records)
    struct = ["--dtype", "[('a', '<i8'), ('b', '<i4')]", "--offset", "16"]
    assert run(capsys, "convert", tmp_path / "h.bin", *struct, "--to", tmp_path / "h.arrow")[0] == 0
    rc, _, err = run(
        capsys, "convert", tmp_path / "h.arrow", *struct, "--header", tmp_path / "h.bin", "--to", tmp_path / "back.bin"
    )
    assert rc == 0 and err == "" and (tmp_path / "back.bin").read_bytes() == (tmp_path / "h.bin").read_bytes()


def test_a_packed_dtype_list_hints_at_c_alignment(tmp_path, capsys):
    (tmp_path / "c.bin").write_bytes(bytes(32))  # two records of a C struct { int8_t a; int64_t b; }
    rc, _, err = run(
        capsys, "convert", tmp_path / "c.bin", "--dtype", "[('a', 'i1'), ('b', '<i8')]", "--to", tmp_path / "c.parquet"
    )
    assert rc == 1 and "32 bytes of records: 3 records of 9 bytes and 5 bytes left over" in err
    assert (
        "note: a --dtype list is packed, 9 bytes with no padding, where a C compiler aligns each field and gets 16 "
        "bytes: for a C struct, use --struct HEADER:NAME, or --dtype \"{'names': [...], 'formats': [...], "
        "'aligned': True}\""
    ) in err


def test_small_files_show_real_figures(tmp_path, capsys):
    (tmp_path / "s.bin").write_bytes(bytes(40))
    rc, out, _ = run(capsys, "convert", tmp_path / "s.bin", "--dtype", "[('a', '<i4')]", "--to", tmp_path / "s.arrow")
    assert rc == 0 and out.startswith("converted 10 records, 40 bytes in, ") and " 0.00 GB/s" not in out
    assert " 0.0 MB" not in out


@pytest.mark.slow
def test_bench_help_is_whole_and_names_the_installed_module():
    run = subprocess.run([sys.executable, "-m", "layouts", "bench", "--help"], capture_output=True, text=True)
    text = " ".join(run.stdout.split())
    assert run.returncode == 0
    assert (
        "The reduction and conversion suite with its report (layouts bench; the same as python -m "
        "layouts.benchmarks, or python -m benchmarks in a source checkout)."
    ) in text
    ok = subprocess.run([sys.executable, "-m", "layouts.benchmarks", "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "--full" in ok.stdout
