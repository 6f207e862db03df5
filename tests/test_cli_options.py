"""``layouts convert`` options, its errors (one line, exit 1; 2 for a wrong command line) and streaming to stdout."""

import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo
from layouts import _cli
from layouts._cli import command_hints, main

HEADER = """\
#include <stdint.h>
enum color { RED = 1, GREEN = 2 };
struct pos { float x, y; };
struct rec {
    int32_t qty;
    double px;
    char name[12];
    enum color color;
    struct pos pos;
    union { int32_t i; float f; } u;
    const char *note;
};
"""
C_OPTIONS = ["--unions", "u=i", "--pointers", "int"]


@pytest.fixture
def files(tmp_path):
    """A C header and 100 records laid out by it (qty -1 and px NaN mean missing)."""
    (tmp_path / "rec.h").write_text(HEADER)
    layout = lo.Layout.from_c(str(tmp_path / "rec.h"), "rec", unions={"u": "i"}, pointers="int")
    a = np.zeros(100, layout.dtype)
    a["qty"] = np.arange(100)
    a["qty"][::10] = -1
    a["px"] = np.linspace(1, 2, 100)
    a["px"][5] = np.nan
    a["name"] = [b"ab", b"hello world!"] * 50
    a["color"] = [1, 2] * 50
    a["pos"]["x"], a["u"]["i"], a["note"] = 1.5, 7, 0xDEADBEEF
    a.tofile(tmp_path / "rec.bin")
    return tmp_path


def run(capsys, *argv):
    rc = main(["convert", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(err, *parts):
    """err is exactly one line, the command's error, holding every part."""
    assert err.startswith("layouts convert: error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


def test_options_map_the_record_and_round_trip(files, capsys):
    struct = ["--struct", f"{files}/rec.h:rec", *C_OPTIONS]
    rc, out, err = run(
        capsys,
        files / "rec.bin",
        *struct,
        "--string",
        "name",
        "--enum-as",
        "int",
        "--flatten",
        "--null",
        "qty=-1",
        "--null",
        "px=nan",
        "--to",
        files / "rec.parquet",
    )
    assert rc == 0 and err == "" and out.startswith("converted 100 records")
    t = pq.read_table(files / "rec.parquet")
    assert t.column_names == ["qty", "px", "name", "color", "pos.x", "pos.y", "u.i", "note"]
    assert t.schema.field("name").type == pa.string() and t.column("name")[:2].to_pylist() == ["ab", "hello world!"]
    assert t.schema.field("color").type == pa.uint32() and t.column("note")[0].as_py() == 0xDEADBEEF
    assert (t.column("qty").null_count, t.column("px").null_count) == (10, 1)
    # back: nulls need a value to write (the hint names the flag, not Python), then bit-exact
    rc, out, err = run(
        capsys,
        files / "rec.parquet",
        *struct,
        "--string",
        "name",
        "--enum-as",
        "int",
        "--flatten",
        "--to",
        files / "back.bin",
    )
    one_error(err, "column 'qty' has 10 nulls", "pass --fill qty=VALUE to write a value")
    assert rc == 1 and "fill={" not in err and not (files / "back.bin").exists()
    rc, out, err = run(
        capsys,
        files / "rec.parquet",
        *struct,
        "--string",
        "name",
        "--enum-as",
        "int",
        "--flatten",
        "--fill",
        "qty=-1",
        "--fill",
        "px=nan",
        "--to",
        files / "back.bin",
    )
    assert rc == 0 and (files / "back.bin").read_bytes() == (files / "rec.bin").read_bytes()


def test_bytes_modes_enums_and_truncate(files, capsys):
    struct = ["--struct", f"{files}/rec.h:rec", *C_OPTIONS]
    assert run(capsys, files / "rec.bin", *struct, "--to", files / "fixed.arrow")[0] == 0
    t = pa.ipc.open_file(str(files / "fixed.arrow")).read_all()
    assert t.schema.field("name").type == pa.binary(12) and t.column("name")[0].as_py() == b"ab" + bytes(10)
    assert t.column("color").type == pa.dictionary(pa.int32(), pa.string()) and t.column("color")[0].as_py() == "RED"
    assert run(capsys, files / "rec.bin", *struct, "--bytes-as", "name=binary", "--to", files / "bin.arrow")[0] == 0
    assert pa.ipc.open_file(str(files / "bin.arrow")).read_all().column("name")[0].as_py() == b"ab"
    # text longer than the char array: an error naming --truncate, or cut with it
    long = pa.table(
        {
            "qty": pa.array([1], pa.int32()),
            "px": [1.0],
            "name": ["a name longer than 12"],
            "color": ["GREEN"],
            "pos": [{"x": 1.0, "y": 2.0}],
            "u": [{"i": 3}],
            "note": pa.array([5], pa.uint64()),
        }
    )
    pq.write_table(long, files / "long.parquet")
    rc, _, err = run(capsys, files / "long.parquet", *struct, "--string", "name", "--to", files / "long.bin")
    one_error(err, "is longer than field 'name'", "pass --truncate to cut such values to 12 bytes")
    assert (
        run(capsys, files / "long.parquet", *struct, "--string", "name", "--truncate", "--to", files / "long.bin")[0]
        == 0
    )
    back = np.fromfile(
        files / "long.bin", lo.Layout.from_c(str(files / "rec.h"), "rec", unions={"u": "i"}, pointers="int").dtype
    )
    assert back["name"][0] == b"a name longe" and back["color"][0] == 2


@pytest.mark.parametrize(
    "argv, parts",
    [
        (["--to", "{d}/out.csv"], ["from suffix '.csv'", "parquet (.parquet, .pq)", "records (.bin", "--format"]),
        (["--to", "{d}/out"], ["from no suffix", "arrows (.arrows)"]),
        (["--to", "{d}/o.parquet", "--chunk", "16"], ["--chunk 16 is smaller than one record (56 bytes)"]),
        (
            ["--to", "{d}/o.parquet", "--compression", "lzma"],
            ["'lzma' is not a codec for parquet output", "snappy, gzip"],
        ),
        (["--to", "{d}/o.arrow", "--compression", "snappy"], ["'snappy' is not a codec for arrow output", "lz4, zstd"]),
        (["--to", "{d}/o.bin", "--compression", "zstd"], ["records output is not compressed"]),
        (["--to", "{d}/o.parquet", "--null", "nope=1"], ["'nope' is not a leaf field", "qty, px, name"]),
        (["--to", "{d}/o.parquet", "--null", "qty=abc"], ["--null qty=abc: not a value of field 'qty' (<i4)"]),
        (["--to", "{d}/o.parquet", "--null", "name=x"], ["--null name", "apply to numeric and datetime fields"]),
        (["--to", "{d}/o.parquet", "--string", "qty"], ["['qty'], which are not char-array (S<n>) fields"]),
        (["--to", "{d}/o.parquet", "--bytes-as", "text"], ["--bytes-as 'text': the mode must be one of fixed"]),
        (["--to", "{d}/o.parquet", "--fill", "qty=1"], ["--fill applies when writing records"]),
        (["--to", "{d}/o.bin", "--null", "qty=1"], ["use --fill NAME=VALUE"]),
    ],
)
def test_wrong_options_are_one_line(files, capsys, argv, parts):
    rc, out, err = run(
        capsys, files / "rec.bin", "--struct", f"{files}/rec.h:rec", *C_OPTIONS, *[a.format(d=files) for a in argv]
    )
    library = any("apply to numeric" in p for p in parts)  # the library's LayoutError; the rest: wrong command lines
    assert rc == (1 if library else 2) and out == ""
    one_error(err, *parts)


def test_no_binary_to_a_terminal(files, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    rc, out, err = run(capsys, files / "rec.bin", "--struct", f"{files}/rec.h:rec", *C_OPTIONS, "--to", "-")
    assert rc == 2 and out == ""
    one_error(err, "--to - writes binary data, and standard output is a terminal")


def test_options_for_c_only_and_unions(files, capsys):
    rc, _, err = run(capsys, files / "rec.bin", "--dtype", "[('a', '<i4')]", "--enum-as", "int", "--to", files / "a.pq")
    one_error(err, "--enum-as applies to C declarations")
    # every member of a union converts (one column each over the same bytes)...
    assert (
        run(capsys, files / "rec.bin", "--struct", f"{files}/rec.h:rec", "--pointers", "int", "--to", files / "a.pq")[0]
        == 0
    )
    assert pq.read_table(files / "a.pq").schema.field("u").type.num_fields == 2
    rc, _, err = run(
        capsys, files / "a.pq", "--struct", f"{files}/rec.h:rec", "--pointers", "int", "--to", files / "a.bin"
    )  # ...but records written back need one per union
    one_error(err, "share bytes of the record", "--unions u=i")
    rc, _, err = run(
        capsys, files / "rec.bin", "--struct", f"{files}/rec.h:rec", "--unions", "u=i", "--to", files / "a.pq"
    )
    one_error(err, "--pointers int")


def test_no_traceback_for_damaged_or_empty_input(files, capsys):
    struct = ["--struct", f"{files}/rec.h:rec", *C_OPTIONS]
    assert run(capsys, files / "rec.bin", *struct, "--to", files / "ok.parquet")[0] == 0
    data = (files / "ok.parquet").read_bytes()
    (files / "cut.parquet").write_bytes(data[: len(data) // 2])
    (files / "bad.parquet").write_bytes(data[:4] + bytes(len(data) - 8) + data[-4:])
    (files / "empty.bin").write_bytes(b"")
    for argv in (
        [files / "cut.parquet", *struct, "--to", files / "x.bin"],
        [files / "bad.parquet", *struct, "--to", files / "x.bin"],
        [files / "empty.bin", *struct, "--to", files / "empty.parquet"],
    ):
        rc, out, err = run(capsys, *argv)
        assert rc in (0, 1) and "Traceback" not in err and err.count("\n") <= 1, err


def test_unexpected_errors_interrupts_and_warnings_are_one_line(files, capsys, monkeypatch):
    struct = ["--struct", f"{files}/rec.h:rec", *C_OPTIONS]
    head = (files / "rec.bin").read_bytes()[:76]  # one record of 56 bytes and 20 bytes
    (files / "part.bin").write_bytes(head)
    rc, out, err = run(capsys, files / "part.bin", *struct, "--trailing", "ignore", "--to", files / "p.parquet")
    assert rc == 0 and err.startswith("layouts convert: warning: ") and err.count("\n") == 1
    assert "20 bytes left over; skipped those 20 bytes" in err

    def boom(*args, **kwargs):
        raise ValueError("first line\nsecond line")

    monkeypatch.setattr(lo, "convert", boom)
    rc, out, err = run(capsys, files / "rec.bin", *struct, "--to", files / "v.parquet")
    assert rc == 1 and err == "layouts convert: error: ValueError: first line second line (--debug shows where)\n"
    with pytest.raises(ValueError):  # --debug: the traceback
        main(["convert", str(files / "rec.bin"), *struct, "--to", str(files / "v.parquet"), "--debug"])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lo, "convert", interrupted)
    rc, out, err = run(capsys, files / "rec.bin", *struct, "--to", files / "v.parquet")
    assert rc == 130 and err == "layouts convert: interrupted; no output was written\n"


def test_hints_name_the_flags():
    assert command_hints("pass fill={'qty': value} to write") == "pass --fill qty=VALUE to write"
    assert command_hints("e.g. Layout.from_c(..., unions={'u': 'f'})") == "e.g. --unions u=f"
    assert command_hints("pass overwrite=True (--overwrite) to replace") == "pass --overwrite to replace"
    assert (
        command_hints("pass truncate=True to cut; or trailing='ignore'")
        == "pass --truncate to cut; or --trailing ignore"
    )
    assert command_hints("nulls['px']=1.5 is not exactly") == "--null px=1.5 is not exactly"
    assert command_hints("map it with bytes_as={'sym': 'binary'}") == "map it with --bytes-as sym=binary"


def test_compile_notice_on_a_terminal_only(files, capsys, monkeypatch):
    layout = lo.Layout.from_dtype(np.dtype([("a", "<i4")]))
    import layouts._backends as backends

    monkeypatch.setattr(backends, "kernels_cached", lambda device="cpu", reverse=False: False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    _cli.warm_up(layout, "cpu", "arrow", "convert", quiet=False)
    err = capsys.readouterr().err
    assert err.startswith("layouts convert: compiling the conversion kernels for this machine, once (no compiled")
    # each kernel named as it starts, then the time it took, measured
    assert "\r  kernel 1 of 3: records -> columns ..." in err and "\r  kernel 3 of 3: columns -> records ..." in err
    assert re.search(r"layouts convert: compiled the kernels in \d+\.\d s\n$", err), err
    _cli.warm_up(layout, "cpu", "arrow", "convert", quiet=True)
    monkeypatch.setattr(backends, "kernels_cached", lambda device="cpu", reverse=False: True)
    _cli.warm_up(layout, "cpu", "records", "convert", quiet=False)
    assert capsys.readouterr().err == ""


def _layouts(*argv, **kwargs):
    return subprocess.run([sys.executable, "-m", "layouts", "convert", *map(str, argv)], capture_output=True, **kwargs)


@pytest.mark.slow  # (the fast loop keeps a lighter one of its kind)
def test_stdout_streams_both_ways(files):
    struct = ["--struct", f"{files}/rec.h:rec", *C_OPTIONS, "--string", "name"]
    fwd = _layouts(files / "rec.bin", *struct, "--null", "qty=-1", "--to", "-", "--quiet")
    assert fwd.returncode == 0 and fwd.stderr == b""
    t = pa.ipc.open_stream(fwd.stdout).read_all()  # the Arrow IPC stream format
    assert t.num_rows == 100 and t.column("qty").null_count == 10
    back = _layouts("-", *struct, "--fill", "qty=-1", "--to", "-", "--quiet", input=fwd.stdout)
    assert back.returncode == 0 and back.stderr == b""
    assert back.stdout == (files / "rec.bin").read_bytes()


@pytest.mark.slow
def test_closed_pipe_exits_quietly(tmp_path):
    np.arange(400_000, dtype=np.int64).tofile(tmp_path / "big.bin")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "layouts",
            "convert",
            str(tmp_path / "big.bin"),
            "--dtype",
            "[('a', '<i8')]",
            "--chunk",
            "64K",
            "--to",
            "-",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert len(p.stdout.read(100)) == 100
    p.stdout.close()
    assert p.wait(timeout=60) == 141 and p.stderr.read() == b""
    p.stderr.close()
    assert not [f for f in os.listdir(tmp_path) if f != "big.bin"]
