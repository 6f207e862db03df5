"""``layouts convert --stream`` and ``layouts inspect --stream``: a stream file to a
directory of one table per record type and back, byte for byte; the set written whole
or not at all; every error of the command's stream parts."""

import json
import os
import re
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.feather  # noqa: F401 - pa.feather below
import pyarrow.parquet as pq
import pytest
from test_streams import ITCH, _packets, _pcap_by_hand, itch_file

from layouts._cli import main
from layouts._stream import files as F

ITCH_TYPES = [v[0] for v in ITCH.values()]


@pytest.fixture
def pcap(tmp_path):
    path = tmp_path / "cap.pcap"
    path.write_bytes(_pcap_by_hand("<", False, _packets(np.random.default_rng(3), 40)))
    return path


@pytest.fixture
def itch(tmp_path):
    path = tmp_path / "day.itch"
    raw, _ = itch_file(np.random.default_rng(4), list(ITCH), 300)
    path.write_bytes(raw)
    return path


def run(*argv):
    return main([str(a) for a in argv])


def error(capsys, *argv, status=1):
    try:
        got = run(*argv)
    except SystemExit as stop:  # argparse's usage errors
        got = stop.code
    assert got == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def listing(path):
    return sorted(os.listdir(path))


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcap_to_a_directory_and_back_byte_for_byte(tmp_path, capsys, order):
    src = tmp_path / "cap.pcap"
    src.write_bytes(_pcap_by_hand(order, order == ">", _packets(np.random.default_rng(1), 25)))
    assert run("convert", src, "--stream", "pcap", "--to", tmp_path / "cap") == 0
    out = capsys.readouterr().out
    assert (
        out == f"converted {src}: 25 records (packet 25), {src.stat().st_size:,} bytes -> {tmp_path / 'cap'} "
        f"(2 files)\n"
    )
    assert listing(tmp_path / "cap") == ["_header.parquet", "packet.parquet"]
    meta = json.loads(pq.read_schema(tmp_path / "cap" / "packet.parquet").metadata[b"layouts.stream"])
    assert meta == {"stream": "pcap", "table": "packet", "order": "little" if order == "<" else "big"}
    assert pq.read_table(tmp_path / "cap" / "packet.parquet").num_rows == 25
    assert run("convert", tmp_path / "cap", "--stream", "pcap", "--to", tmp_path / "back.pcap") == 0
    assert (tmp_path / "back.pcap").read_bytes() == src.read_bytes()
    assert "converted" in capsys.readouterr().out
    assert listing(tmp_path) == ["back.pcap", "cap", "cap.pcap"]  # no temporary left


@pytest.mark.parametrize("fmt", ["parquet", "feather", "arrow", "arrows"])
def test_itch50_every_type_and_format_round_trips(tmp_path, itch, fmt):
    out = tmp_path / "day"
    assert run("convert", itch, "--stream", "itch50", "--to", f"{out}/", "--format", fmt, "--quiet") == 0
    suffix = F.SUFFIX[fmt]
    assert listing(out) == sorted(t + suffix for t in ITCH_TYPES)  # every type: the empty ones too
    assert run("convert", out, "--stream", "itch50", "--to", tmp_path / "back.itch", "--quiet") == 0
    assert (tmp_path / "back.itch").read_bytes() == itch.read_bytes()


def test_empty_types_are_empty_tables_with_their_columns(tmp_path):
    raw = itch_file(np.random.default_rng(2), ["A"], 5)[0]
    (tmp_path / "a.itch").write_bytes(raw)
    assert run("convert", tmp_path / "a.itch", "--stream", "itch50", "--to", tmp_path / "d", "--quiet") == 0
    trade = pq.read_table(tmp_path / "d" / "trade.parquet")
    assert trade.num_rows == 0 and "match_number" in trade.column_names and trade.column_names[0] == "_offset"
    assert pq.read_table(tmp_path / "d" / "add_order.parquet").num_rows == 5
    assert run("convert", tmp_path / "d", "--stream", "itch50", "--to", tmp_path / "b.itch", "--quiet") == 0
    assert (tmp_path / "b.itch").read_bytes() == raw


def test_a_toml_description_with_gaps_and_unknown_records(tmp_path, capsys):
    desc = tmp_path / "tagged.toml"
    desc.write_text(
        textwrap.dedent("""
        name = "tagged"
        [header]
        fields = [["magic", "S2"], ["n", ">u2"]]
        [[section]]
        bytes = "n"
        framing = { length = { offset = 0, size = 1 } }
        tag = { offset = 0, size = 1 }
        unknown = "keep"
        [section.types.a]
        tag = "a"
        fields = [["k", "S1"], ["v", ">u2"]]
        [section.types.b]
        tag = "b"
        fields = [["k", "S1"], ["w", "<i4"]]
        """)
    )
    raw = b"TG\x00\x0d" + b"\x03a\x00\x07" + b"\x02zz" + b"\x05b\x01\x00\x00\x00" + b"trailer"
    (tmp_path / "s.bin").write_bytes(raw)
    assert run("convert", tmp_path / "s.bin", "--stream", desc, "--to", tmp_path / "d") == 0
    assert "2 records (a 1, b 1)" in capsys.readouterr().out
    assert listing(tmp_path / "d") == ["_gaps.parquet", "_header.parquet", "_unknown.parquet", "a.parquet", "b.parquet"]
    assert run("convert", tmp_path / "d", "--stream", desc, "--to", tmp_path / "back.bin") == 0
    assert (tmp_path / "back.bin").read_bytes() == raw
    assert run("inspect", tmp_path / "s.bin", "--stream", desc) == 0
    assert capsys.readouterr().out.splitlines()[-7:] == [
        "table     records  bytes",
        "a               1      4",
        "b               1      6",
        "_header         1      4",
        "_gaps           1      7",
        "_unknown        1      3",
        "total           3     24",
    ]


# ------------------------------------------------------------------ inspect


def test_inspect_prints_the_header_and_each_type(pcap, capsys):
    assert run("inspect", pcap, "--stream", "pcap") == 0
    lines = capsys.readouterr().out.splitlines()
    size = pcap.stat().st_size
    assert lines[0] == f"{pcap}: a pcap stream, {size:,} bytes, byte order little"
    assert lines[1:4] == ["header (24 bytes):", "  magic          2712847316", "  version_major  2"]
    assert lines[-4:] == [
        "table    records  bytes",
        f"packet        40  {size - 24:>5,}",
        "_header        1     24",
        f"total         40  {size:>5,}",
    ]
    assert run("inspect", pcap, "--stream", "pcap", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["header"]["snaplen"] == 65535 and doc["order"] == "little" and doc["bytes"] == size
    assert doc["tables"] == {"packet": {"records": 40, "bytes": size - 24}, "_header": {"records": 1, "bytes": 24}}


def test_inspect_itch_counts_add_up(itch, capsys):
    assert run("inspect", itch, "--stream", "itch50", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["header"] is None and list(doc["tables"]) == ITCH_TYPES
    assert sum(t["records"] for t in doc["tables"].values()) == 300
    assert sum(t["bytes"] for t in doc["tables"].values()) == itch.stat().st_size


# ------------------------------------------------------------------ usage errors (exit 2)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--struct", "x.h:t"], r"argument --struct: not allowed with argument --stream"),
        (["--dtype", "u1"], r"argument --dtype: not allowed with argument --stream"),
        (
            ["--null", "a=1"],
            r"error: --null does not apply with --stream: the record types and their fields come from the "
            r"stream description; leave --null out",
        ),
        (["--string", "a"], r"--string does not apply with --stream"),
        (["--offset", "8"], r"--offset does not apply with --stream"),
        (["--count", "3"], r"--count does not apply with --stream"),
        (["--device", "cuda"], r"--device cuda: record streams are read and written on the CPU; leave --device out"),
        (
            ["--format", "records"],
            r"--format records: --stream writes a directory of tables, one file per record type: "
            r"--format parquet\|feather\|arrow\|arrows",
        ),
        (["--byteorder", "big"], r"--byteorder big: a stream's byte order comes from its description"),
        (
            ["--compression", "lz4", "--format", "arrow", "--compression", "snappy"],
            r"--compression 'snappy' is not a codec for arrow output",
        ),
    ],
)
def test_conflicting_options_are_usage_errors(pcap, tmp_path, capsys, argv, match):
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", tmp_path / "d", *argv, status=2)
    assert re.search(match, err), err
    assert not (tmp_path / "d").exists()


def test_usage_errors_of_paths(pcap, tmp_path, capsys):
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", tmp_path / "out.parquet", status=2)
    assert "looks like a file name; give a directory, e.g. --to" in err and "out.parquet/ for a directory" in err
    for src, dst in (("-", tmp_path / "d"), (pcap, "-")):
        err = error(capsys, "convert", src, "--stream", "pcap", "--to", dst, status=2)
        assert "into a directory of tables (not standard output): give paths instead of -; going back" in err
    assert run("convert", pcap, "--stream", "pcap", "--to", f"{tmp_path / 'x.parquet'}/", "--quiet") == 0
    assert listing(tmp_path / "x.parquet") == ["_header.parquet", "packet.parquet"]
    err = error(capsys, "convert", tmp_path / "x.parquet", "--stream", "pcap", "--to", tmp_path, status=2)
    assert "is a directory; going back (SRC" in err and "--to names the stream file to write" in err
    err = error(
        capsys,
        "convert",
        tmp_path / "x.parquet",
        "--stream",
        "pcap",
        "--to",
        tmp_path / "b",
        "--compression",
        "zstd",
        status=2,
    )
    assert "--compression applies when writing tables (stream -> directory)" in err
    err = error(capsys, "inspect", pcap, "tick", "--stream", "pcap", status=2)
    assert "STRUCT 'tick' does not apply with --stream" in err
    assert "--pack does not apply with --stream" in error(
        capsys, "inspect", pcap, "--stream", "pcap", "--pack", "1", status=2
    )


# ------------------------------------------------------------------ errors (exit 1)


def test_spec_that_is_missing_or_not_toml(pcap, tmp_path, capsys):
    err = error(capsys, "convert", pcap, "--stream", "pcapng", "--to", tmp_path / "d")
    assert (
        "layouts convert: error: no built-in stream 'pcapng'; built-ins are dbn, itch50, las, pcap, segy; give --stream NAME or "
        "--stream PATH.toml" in err
    )
    err = error(capsys, "convert", pcap, "--stream", tmp_path / "nope.toml", "--to", tmp_path / "d")
    assert f"cannot read the stream description {tmp_path / 'nope.toml'}: No such file or directory" in err
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[section]\nframing = 1\n')
    err = error(capsys, "inspect", pcap, "--stream", bad)
    assert f"{bad}: not valid TOML" in err and "line 2" in err and "see docs/streams.md" in err
    bad.write_text('[[section]]\nframing = { size = 4 }\n[section.types.a]\nfields = [["x", "u4"]]\n')
    err = error(capsys, "inspect", pcap, "--stream", bad)
    assert "section[0].types.a.fields.x" in err and "byte order" in err
    assert not (tmp_path / "d").exists()


def test_damaged_stream_names_the_byte(tmp_path, capsys):
    (tmp_path / "bad.pcap").write_bytes(b"\0" * 30)
    err = error(capsys, "convert", tmp_path / "bad.pcap", "--stream", "pcap", "--to", tmp_path / "d")
    assert "bad.pcap: byte 0: magic number 00000000 is none of" in err
    assert listing(tmp_path) == ["bad.pcap"]


def test_overwrite_rules(pcap, tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    (d / "_gaps.parquet").write_bytes(b"stale")  # of this set's names: replaced as part of it
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", d)
    assert (
        f"{d} holds _gaps.parquet of this conversion's files; pass --overwrite to replace them (the directory's "
        f"other files are left alone)" in err
    )
    assert listing(d) == ["_gaps.parquet", "notes.txt"]
    assert run("convert", pcap, "--stream", "pcap", "--to", d, "--overwrite", "--quiet") == 0
    assert listing(d) == ["_header.parquet", "notes.txt", "packet.parquet"]  # the stale _gaps is gone
    assert (d / "notes.txt").read_text() == "mine"
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", d)
    assert "holds packet.parquet, _header.parquet of this conversion's files; pass --overwrite" in err
    # a file of the set that is not a regular file is never replaced
    os.remove(d / "packet.parquet")
    (d / "packet.parquet").mkdir()
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", d, "--overwrite")
    assert f"{d / 'packet.parquet'} is not a regular file; it is never replaced" in err
    os.rmdir(d / "packet.parquet")
    # the way back: an existing output needs --overwrite
    assert run("convert", pcap, "--stream", "pcap", "--to", d, "--overwrite", "--quiet") == 0
    (tmp_path / "b.pcap").write_bytes(b"old")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", tmp_path / "b.pcap")
    assert f"{tmp_path / 'b.pcap'} exists; pass --overwrite to replace it" in err
    assert (tmp_path / "b.pcap").read_bytes() == b"old"
    assert run("convert", d, "--stream", "pcap", "--to", tmp_path / "b.pcap", "--overwrite", "--quiet") == 0
    assert (tmp_path / "b.pcap").read_bytes() == pcap.read_bytes()
    # through a link: its target replaced, the link kept
    (tmp_path / "link").symlink_to(tmp_path / "b.pcap")
    (tmp_path / "b.pcap").write_bytes(b"old")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", tmp_path / "link")
    assert f"{tmp_path / 'link'} exists; pass --overwrite to replace it" in err
    assert run("convert", d, "--stream", "pcap", "--to", tmp_path / "link", "--overwrite", "--quiet") == 0
    assert os.path.islink(tmp_path / "link") and (tmp_path / "b.pcap").read_bytes() == pcap.read_bytes()


@pytest.mark.slow
def test_the_way_back_streams_into_pipes_devices_and_standard_output(pcap, tmp_path):
    """attack5: the way back refused a FIFO, /dev/null and standard output (`--to -`), which
    every other output of the command writes into; now it streams into them, and
    standard output appended to one of its own tables is refused."""
    d = tmp_path / "d"
    assert run("convert", pcap, "--stream", "pcap", "--to", d, "--quiet") == 0
    back = [sys.executable, "-m", "layouts", "convert", str(d), "--stream", "pcap"]
    done = subprocess.run([*back, "--to", "-"], capture_output=True, timeout=120)
    assert done.returncode == 0 and done.stdout == pcap.read_bytes(), done.stderr
    assert done.stderr.decode() == f"converted {d} (2 files): 40 records -> -\n"
    done = subprocess.run([*back, "--to", "/dev/null"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, f"converted {d} (2 files): 40 records -> /dev/null\n"), done.stderr
    os.mkfifo(tmp_path / "fifo")
    reader = subprocess.Popen(["cat", str(tmp_path / "fifo")], stdout=subprocess.PIPE)
    done = subprocess.run([*back, "--to", str(tmp_path / "fifo"), "--quiet"], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert reader.communicate(timeout=60)[0] == pcap.read_bytes()
    table = (d / "packet.parquet").read_bytes()
    with open(d / "packet.parquet", "ab") as own:
        done = subprocess.run([*back, "--to", "-"], stdout=own, stderr=subprocess.PIPE, text=True, timeout=120)
    assert (
        done.returncode == 2
        and "--to - (standard output) is " in done.stderr
        and "one of the input's tables" in done.stderr
    )
    assert (d / "packet.parquet").read_bytes() == table


def test_a_directory_that_is_a_file(pcap, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", tmp_path / "f")
    assert (
        f"{tmp_path / 'f'} exists and is not a directory; --stream writes a directory, one file per record type" in err
    )
    assert (tmp_path / "f").read_text() == "x"
    err = error(capsys, "convert", pcap, "--stream", "pcap", "--to", tmp_path / "no" / "d")
    assert f"its parent directory {tmp_path / 'no'} does not exist; create it first" in err


def test_no_way_writes_over_its_own_input(pcap, tmp_path, capsys):
    """attack5: the way back --to one of its own tables (with --overwrite) replaced it with
    the records, and a stream file named as a table, converted --to its own directory, was
    replaced by its table: both refused, nothing changed."""
    out = tmp_path / "t"
    assert run("convert", pcap, "--stream", "pcap", "--to", f"{out}/", "--quiet") == 0
    table = (out / "packet.parquet").read_bytes()
    err = error(capsys, "convert", out, "--stream", "pcap", "--to", out / "packet.parquet", "--overwrite", status=2)
    assert "packet.parquet, one of the input's tables (also with --overwrite" in err
    assert (out / "packet.parquet").read_bytes() == table
    same = tmp_path / "d" / "packet.parquet"
    same.parent.mkdir()
    raw = pcap.read_bytes()
    same.write_bytes(raw)
    err = error(capsys, "convert", same, "--stream", "pcap", "--to", same.parent, "--overwrite", status=2)
    assert "named as its tables are (.parquet): the set written there would replace it" in err
    assert same.read_bytes() == raw


def test_list_lengths_from_the_header_through_the_command(tmp_path, capsys):
    """attack5: convert and inspect --stream failed on any description whose list length
    is a header expression (the segy built-in), with an internal message; LAS 1.2's header
    was counted as 375 bytes (its size field says 227)."""
    spec = tmp_path / "n.toml"
    spec.write_text(
        'name = "h"\norder = "little"\n[header]\nfields = [["n", "<u4"]]\n'
        '[[section]]\nframing = { size = 4 }\n[section.types.r]\nfields = [["a", "u1[n]"]]\n'
    )
    data = tmp_path / "n.dat"
    data.write_bytes(struct.pack("<I", 4) + bytes(range(12)))
    assert run("convert", data, "--stream", spec, "--to", f"{tmp_path / 'out'}/") == 0
    assert "3 records (r 3), 16 bytes" in capsys.readouterr().out
    assert pq.read_table(tmp_path / "out" / "r.parquet").column("a").to_pylist()[2] == [8, 9, 10, 11]
    assert run("inspect", data, "--stream", spec) == 0
    assert re.search(r"r +3 +12\n_header +1 +4\ntotal +3 +16", capsys.readouterr().out)
    assert run("convert", f"{tmp_path / 'out'}/", "--stream", spec, "--to", tmp_path / "back.dat", "--quiet") == 0
    assert (tmp_path / "back.dat").read_bytes() == data.read_bytes()


def test_fill_and_inspect_usage_in_the_commands_terms(itch, tmp_path, capsys):
    """attack5: a second --fill of one field silently won, an out-of-range one failed after
    reading with NumPy's text (exit 1), a message had "add_order. shares", and inspect -
    said "No such file"."""
    out = tmp_path / "t"
    assert run("convert", itch, "--stream", "itch50", "--to", f"{out}/", "--quiet") == 0
    back = ["convert", out, "--stream", "itch50", "--to", tmp_path / "b.itch"]
    err = error(capsys, *back, "--fill", "add_order.shares=1", "--fill", "add_order.shares=2", status=2)
    assert "--fill add_order.shares is given twice" in err
    err = error(capsys, *back, "--fill", "add_order.shares=-1", status=2)
    assert "--fill add_order.shares=-1: field 'shares' (>u4) holds 0 to 4294967295" in err
    err = error(capsys, *back, "--fill", "add_order.shares=abc", status=2)
    assert "--fill add_order.shares=abc: not a value" in err
    err = error(capsys, "inspect", "-", "--stream", "itch50", status=2)
    assert "inspect --stream reads a stream file, not standard input" in err
    assert not (tmp_path / "b.itch").exists()


def test_errors_of_the_way_back(pcap, itch, tmp_path, capsys):
    d = tmp_path / "d"
    assert run("convert", pcap, "--stream", "pcap", "--to", d, "--quiet") == 0
    back = tmp_path / "b.pcap"
    # read as another stream
    err = error(capsys, "convert", d, "--stream", "itch50", "--to", back)
    assert f"{d / 'packet.parquet'} is no record type of itch50 and no reserved table; remove or rename it" in err
    assert err.endswith("it was written from a pcap stream: check --stream\n")
    # an extra unknown file
    pq.write_table(pa.table({"a": [1]}), d / "packets.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back)
    assert (
        f"{d / 'packets.parquet'} is no record type of pcap and no reserved table; remove or rename it (a type's "
        f"file is TYPE.parquet; types: packet" in err
    )
    os.remove(d / "packets.parquet")
    # a missing type's file
    os.rename(d / "packet.parquet", tmp_path / "packet.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back)
    assert (
        f"{d} has no packet.parquet: layouts convert --stream writes one file per record type, empty ones too, "
        f"and the way back needs each; restore the file" in err
    )
    # the same table in two formats
    os.rename(tmp_path / "packet.parquet", d / "packet.parquet")
    pa.feather.write_feather(pq.read_table(d / "packet.parquet"), d / "packet.feather")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back)
    assert f"{d} holds both packet.feather and packet.parquet for table 'packet'; pass --format feather|parquet" in err
    assert run("convert", d, "--stream", "pcap", "--to", back, "--format", "parquet", "--quiet") == 0
    assert back.read_bytes() == pcap.read_bytes()
    os.remove(d / "packet.feather")
    # a schema that does not fit
    t = pq.read_table(d / "packet.parquet")
    pq.write_table(t.drop_columns(["orig_len"]), d / "packet.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back, "--overwrite")
    assert (
        f"{d / 'packet.parquet'} has no column 'orig_len', which record type 'packet' needs (its columns: "
        f"_offset, ts_sec, ts_frac, incl_len, orig_len, _tail)" in err
    )
    pq.write_table(t.append_column("note", pa.array(["x"] * t.num_rows)), d / "packet.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back, "--overwrite")
    assert f"{d / 'packet.parquet'} has a column 'note', which record type 'packet' does not have" in err
    pq.write_table(t.set_column(1, "ts_sec", pa.array(["x"] * t.num_rows)), d / "packet.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back, "--overwrite")
    assert (
        f"{d / 'packet.parquet'}: column 'ts_sec' is string, but record type 'packet' needs uint32; cast the "
        f"column to uint32" in err
    )
    # no byte order in the files (not written by the command): --byteorder gives it
    pq.write_table(t.replace_schema_metadata(None), d / "packet.parquet")
    h = pq.read_table(d / "_header.parquet")
    pq.write_table(h.replace_schema_metadata(None), d / "_header.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back, "--overwrite")
    assert (
        "pcap's byte order comes from the file's magic number, and these files do not say which it was" in err
        and "pass --byteorder big or --byteorder little" in err
    )
    assert run("convert", d, "--stream", "pcap", "--to", back, "--overwrite", "--byteorder", "little", "--quiet") == 0
    assert back.read_bytes() == pcap.read_bytes()
    # a header that does not fit (two rows)
    pq.write_table(pa.concat_tables([h, h]), d / "_header.parquet")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back, "--overwrite")
    assert f"'_header' ({d / '_header.parquet'}) has 2 rows; a stream has one header" in err
    # a damaged file
    (d / "_header.parquet").write_bytes(b"PAR1 not really")
    err = error(capsys, "convert", d, "--stream", "pcap", "--to", back, "--overwrite")
    assert f"{d / '_header.parquet'} cannot be read as parquet" in err
    # an empty directory
    (tmp_path / "e").mkdir()
    err = error(capsys, "convert", tmp_path / "e", "--stream", "pcap", "--to", back, "--overwrite")
    assert "holds no table files (TYPE.parquet, .feather, .arrow, .arrows) of pcap" in err
    assert back.read_bytes() == pcap.read_bytes()  # every failed way back left the output as it was


# ------------------------------------------------------------------ all or nothing


def test_a_failing_write_leaves_nothing(itch, tmp_path, capsys, monkeypatch):
    real = F._append
    calls = []

    def fail_third(writer, table):
        calls.append(table)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(writer, table)

    monkeypatch.setattr(F, "_append", fail_third)
    err = error(capsys, "convert", itch, "--stream", "itch50", "--to", tmp_path / "d")
    assert "writing " in err and "failed: [Errno 28] No space left on device; nothing was written" in err
    assert listing(tmp_path) == ["day.itch"]  # no directory, no temporary directory
    # into an existing directory: its files as they were
    d = tmp_path / "d"
    d.mkdir()
    (d / "add_order.parquet").write_bytes(b"old")
    (d / "mine").write_text("x")
    calls.clear()
    err = error(capsys, "convert", itch, "--stream", "itch50", "--to", d, "--overwrite")
    assert listing(d) == ["add_order.parquet", "mine"] and (d / "add_order.parquet").read_bytes() == b"old"
    assert listing(tmp_path) == ["d", "day.itch"]


def test_a_failing_move_puts_everything_back(itch, tmp_path, capsys, monkeypatch):
    d = tmp_path / "d"
    d.mkdir()
    (d / "add_order.parquet").write_bytes(b"old")
    (d / "trade.parquet").write_bytes(b"old trade")
    real, moves = os.rename, []

    def rename(a, b):
        moves.append(b)
        if len(moves) == 6:  # after the two old files went aside and three new ones came in
            raise OSError(5, "Input/output error")
        real(a, b)

    monkeypatch.setattr(F.os, "rename", rename)
    err = error(capsys, "convert", itch, "--stream", "itch50", "--to", d, "--overwrite")
    assert f"moving the files into {d} failed: Input/output error; {d} was left as it was" in err
    assert listing(d) == ["add_order.parquet", "trade.parquet"]
    assert (d / "add_order.parquet").read_bytes() == b"old" and (d / "trade.parquet").read_bytes() == b"old trade"
    assert listing(tmp_path) == ["d", "day.itch"]


CHILD = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from layouts._cli import main
from layouts._stream import files as F
where = {where!r}
real = getattr(F, where)
n = []
def hit(*a, **k):
    n.append(1)
    if len(n) == 2 or where == "_commit":
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the set is written, or while it is moved in
    return real(*a, **k)
setattr(F, where, hit)
sys.exit(main(["convert", {src!r}, "--stream", "itch50", "--to", {dst!r}]))
"""


@pytest.mark.parametrize("where", ["_append", "_commit"])
@pytest.mark.slow
def test_ctrl_c_in_a_child(itch, tmp_path, where):
    dst = str(tmp_path / "d")
    code = CHILD.format(tests=os.path.dirname(__file__), where=where, src=str(itch), dst=dst)
    child = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert child.returncode == 130, child.stderr
    if where == "_append":  # nothing was written
        assert child.stderr == "layouts convert: interrupted; no output was written\n"
        assert listing(tmp_path) == ["day.itch"]
    else:  # held while the set was moved into place: it is there, whole
        assert (
            child.stderr == f"layouts convert: interrupted after the output was complete: {dst} was written "
            f"whole and kept\n"
        )
        assert listing(tmp_path) == ["d", "day.itch"] and len(listing(dst)) == len(ITCH_TYPES)


def test_type_names_that_cannot_be_files(tmp_path, capsys):
    desc = tmp_path / "slash.toml"
    desc.write_text('[[section]]\nframing = { size = 1 }\n[section.types."a/b"]\nfields = [["x", "u1"]]\n')
    (tmp_path / "s.bin").write_bytes(b"\x01\x02")
    err = error(capsys, "convert", tmp_path / "s.bin", "--stream", desc, "--to", tmp_path / "d")
    assert "record type 'a/b' cannot name a file (a/b.parquet); rename the type in the stream description" in err


def test_help_shows_the_option():
    out = subprocess.run(
        [sys.executable, "-m", "layouts", "convert", "--help"],
        capture_output=True,
        text=True,
        env=dict(os.environ, COLUMNS="200"),
    ).stdout
    assert "--stream SPEC" in out and "layouts convert day.itch --stream itch50 --to day/" in out


def test_a_value_that_does_not_fit_names_the_file(itch, tmp_path, capsys):
    d = tmp_path / "d"
    assert run("convert", itch, "--stream", "itch50", "--to", d, "--quiet") == 0
    t = pq.read_table(d / "add_order.parquet")
    ts = pa.array([2**48] + t.column("timestamp").to_pylist()[1:], pa.uint64())
    pq.write_table(t.set_column(t.column_names.index("timestamp"), "timestamp", ts), d / "add_order.parquet")
    err = error(capsys, "convert", d, "--stream", "itch50", "--to", tmp_path / "b.itch")
    assert (
        f"table 'add_order' ({d / 'add_order.parquet'}), row 0: field 'timestamp' = 281474976710656 does not fit "
        f"its 6 bytes" in err
    )
    assert listing(tmp_path) == ["d", "day.itch"]


def test_a_missing_source(tmp_path, capsys):
    err = error(capsys, "convert", tmp_path / "nope.pcap", "--stream", "pcap", "--to", tmp_path / "d")
    assert err == f"layouts convert: error: cannot read {tmp_path / 'nope.pcap'}: No such file or directory\n"
    err = error(capsys, "inspect", tmp_path / "nope.pcap", "--stream", "pcap")
    assert err == f"layouts inspect: error: cannot read {tmp_path / 'nope.pcap'}: No such file or directory\n"
    assert listing(tmp_path) == []


@pytest.mark.slow
def test_ctrl_c_at_random_moments(tmp_path):
    """``layouts convert --stream`` sent SIGINT at random moments, startup included, both
    ways: exit 130 after one line (or 0), and the output is absent or complete, with no
    temporary left beside it."""
    import random
    import signal
    import time

    raw, _ = itch_file(np.random.default_rng(8), list(ITCH), 20_000)
    (tmp_path / "day.itch").write_bytes(raw)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def start(*argv):
        return subprocess.Popen(
            [sys.executable, "-m", "layouts", "convert", *map(str, argv), "--quiet"], env=env, stderr=subprocess.PIPE
        )

    t0 = time.perf_counter()
    first = start(tmp_path / "day.itch", "--stream", "itch50", "--to", tmp_path / "full")
    assert first.communicate(timeout=120)[1] == b"" and first.returncode == 0
    seconds = time.perf_counter() - t0
    before = listing(tmp_path)
    rng = random.Random(26)
    codes = []
    for i in range(4):
        back = i % 2 == 1
        dst = tmp_path / ("out.itch" if back else "out")
        proc = (
            start(tmp_path / "full", "--stream", "itch50", "--to", dst)
            if back
            else start(tmp_path / "day.itch", "--stream", "itch50", "--to", dst)
        )
        time.sleep(rng.uniform(0.2, 1.1) * seconds)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        codes.append(proc.returncode)
        assert proc.returncode in (0, 130), err.decode()[-2000:]
        if proc.returncode == 130:
            lines = err.decode().splitlines()
            assert len(lines) == 1 and lines[0].startswith("layouts convert: interrupted"), lines
        if back and dst.exists():
            assert dst.read_bytes() == raw
            dst.unlink()
        elif dst.exists():
            assert listing(dst) == listing(tmp_path / "full")
            subprocess.run(["rm", "-r", str(dst)], check=True)
        assert listing(tmp_path) == before, (i, listing(tmp_path))
    assert 130 in codes, codes  # some runs were cut short


def test_vb_blocks_through_a_toml_description(tmp_path, capsys):
    desc = tmp_path / "vb.toml"
    desc.write_text(
        'name = "vb"\n[[section]]\nframing = "bdw"\ntail = "column"\n[section.types.record]\n'
        'fields = [["id", ">u4"], ["name", "S6"]]\n'
    )

    def rdw(body):
        return struct.pack(">HH", len(body) + 4, 0) + body

    recs = [rdw(struct.pack(">I", i) + b"NAME%02d" % i + b"x" * i) for i in range(7)]
    raw = b"".join(struct.pack(">HH", 4 + sum(map(len, b)), 0) + b"".join(b) for b in [recs[:3], recs[3:4], recs[4:]])
    (tmp_path / "vb.bin").write_bytes(raw)
    assert run("convert", tmp_path / "vb.bin", "--stream", desc, "--to", tmp_path / "vb", "--quiet") == 0
    assert listing(tmp_path / "vb") == ["_blocks.parquet", "record.parquet"]
    assert run("convert", tmp_path / "vb", "--stream", desc, "--to", tmp_path / "back.bin", "--quiet") == 0
    assert (tmp_path / "back.bin").read_bytes() == raw
    assert run("inspect", tmp_path / "vb.bin", "--stream", desc) == 0
    assert capsys.readouterr().out.splitlines()[-3:] == [
        "record         7    119",
        "_blocks        3     12",
        "total          7    131",
    ]
    err = error(capsys, "convert", tmp_path / "vb.bin", "--stream", "bdw", "--to", tmp_path / "x")
    assert (
        "--stream bdw: the bdw framing needs the record's fields: write a .toml description with framing = "
        '"bdw" in its [[section]]' in err
    )
