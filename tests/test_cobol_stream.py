"""A stream description (TOML) whose record types are laid out by a COBOL copybook
(``copybook = "x.cob"``, ``record``, ``codepage``...): read_stream, write_stream and
``layouts convert SRC --stream SPEC --to DIR/``, on Cobrix's test4 file."""

import pyarrow.parquet as pq
import pytest
from cobrix_oracle import DATA

import layouts as lo
from layouts._cli import main

BOOK = """\
       01  COMPANY.
           05  SEGMENT-ID        PIC X(5).
           05  COMPANY-ID        PIC X(10).
           05  COMPANY-NAME      PIC X(15).
           05  ADDRESS           PIC X(25).
           05  TAXPAYER-TYPE     PIC X(1).
           05  TAXPAYER-STR      PIC X(8).
       01  CONTACT.
           05  SEGMENT-ID        PIC X(5).
           05  COMPANY-ID        PIC X(10).
           05  PHONE-NUMBER      PIC X(17).
           05  CONTACT-PERSON    PIC X(28).
"""
SPEC = """\
name = "companies"

[[section]]
framing = {{ length = {{ offset = 2, size = 2, order = "little" }}, prefix = 4 }}
tag = {{ offset = 0, size = 1 }}

[section.types.C]
tag = "C"
copybook = "{book}"
record = "COMPANY"
codepage = "ascii"

[section.types.P]
tag = "P"
copybook = "{book}"
record = "CONTACT"
codepage = "ascii"
{extra}"""
TEST4 = next((DATA / "test4_data").iterdir())


def _spec(tmp_path, book="books/companies.cob", extra=""):
    (tmp_path / "books").mkdir(exist_ok=True)
    (tmp_path / "books" / "companies.cob").write_text(BOOK)
    (tmp_path / "spec.toml").write_text(SPEC.format(book=book, extra=extra))
    return tmp_path / "spec.toml"


def test_read_and_write_stream_with_copybook_types(tmp_path, monkeypatch):
    spec = _spec(tmp_path)
    monkeypatch.chdir(DATA)  # the copybook's path is relative to the description, not to here
    tables = {name: soa.to_arrow() for name, soa in lo.read_stream(TEST4, spec).items()}
    assert {name: t.num_rows for name, t in tables.items()} == {"C": 316, "P": 684}
    first = tables["C"].slice(0, 1).to_pylist()[0]
    assert first["COMPANY-ID"] == "9377942526" and first["TAXPAYER-STR"] == "92714306" and first["_offset"] == 0
    assert tables["P"].column("CONTACT-PERSON")[0].as_py().rstrip("\0") == "Janiece Newcombe"
    assert lo.write_stream(tables, spec) == TEST4.read_bytes()


def test_convert_stream_with_copybook_types(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "out"
    assert main(["convert", str(TEST4), "--stream", str(spec), "--to", f"{out}/", "--quiet"]) == 0
    assert pq.read_table(out / "P.parquet").num_rows == 684
    assert main(["convert", f"{out}/", "--stream", str(spec), "--to", str(tmp_path / "back.dat"), "--quiet"]) == 0
    assert (tmp_path / "back.dat").read_bytes() == TEST4.read_bytes()


@pytest.mark.parametrize(
    "book, extra, message",
    [
        ("nope.cob", "", r"section\[0\]\.types\.C\.copybook: 'nope.cob': no such file .*relative to the description"),
        ("books/companies.cob", "trim = 3\n", r"types\.P\.trim: 3; expected a string, trim = \"\.\.\.\""),
        ("books/companies.cob", 'fields = [["a", "u1"]]\n', r"types\.P: give fields = \[\.\.\.\] or copybook"),
        ("books/companies.cob", 'invalid = "maybe"\n', r"types\.P\.copybook: books/companies.cob: invalid must be"),
        ("books/companies.cob", "spam = 1\n", r"types\.P: unknown key 'spam'"),
    ],
)
def test_copybook_keys_checked_at_load(tmp_path, book, extra, message):
    spec = _spec(tmp_path, book, extra)
    with pytest.raises(lo.LayoutError, match=message):
        lo.read_stream(TEST4, spec)


def test_a_copybook_of_two_records_advises_the_description_key(tmp_path):
    (tmp_path / "two.cob").write_text("       01 R.\n          05 A PIC X.\n       01 S.\n          05 B PIC X.\n")
    (tmp_path / "s.toml").write_text('[[section]]\nframing = "rdw"\n[section.types.D]\ncopybook = "two.cob"\n')
    with pytest.raises(lo.LayoutError, match=r"types\.D\.copybook: two.cob: .* choose one with record = \"R\"$"):
        lo.read_stream(b"", tmp_path / "s.toml")


def test_copybook_options_without_a_copybook(tmp_path):
    (tmp_path / "s.toml").write_text(
        '[[section]]\nframing = "rdw"\n[section.types.A]\nfields = [["a", "u1"]]\ncodepage = "ascii"\n'
    )
    with pytest.raises(lo.LayoutError, match=r"types\.A\.codepage: applies to a record type laid out by a copybook"):
        lo.read_stream(b"", tmp_path / "s.toml")


def test_unknown_record_names_the_key(tmp_path):
    spec = _spec(tmp_path, extra="")
    text = spec.read_text().replace('record = "CONTACT"', 'record = "NOPE"')
    spec.write_text(text)
    with pytest.raises(lo.LayoutError, match=r"types\.P\.copybook: books/companies.cob: .*NOPE"):
        lo.read_stream(TEST4, spec)


def test_ebcdic_text_of_many_records_split_across_threads(tmp_path):
    """Text decoded chunk by chunk on the kernels' threads is joined into one valid
    column (the chunks' strings moved together, their offsets shifted), as C strings are."""
    import numpy as np

    (tmp_path / "r.cob").write_text(
        "       01  REC.\n           05  NAME   PIC X(12).\n           05  AMT    PIC S9(5)V99 COMP-3.\n"
    )
    (tmp_path / "s.toml").write_text(
        'name = "recs"\n[[section]]\nframing = { length = { offset = 0, size = 2, order = "big" }, prefix = 4 }\n'
        '[section.types.R]\ncopybook = "r.cob"\n'
    )
    words = ["", "ABC", "é ü", "HELLO WORLD!", " X"]
    n = 300_000
    recs = np.zeros((n, 20), np.uint8)
    recs[:, 1] = 18  # the length counts the 2 bytes after the length field, then the record
    texts = np.array([np.frombuffer(w.ljust(12).encode("cp037"), np.uint8) for w in words])
    recs[:, 4:16] = texts[np.arange(n) % len(words)]
    recs[:, 16:20] = [0x00, 0x01, 0x23, 0x4C]
    data = recs.tobytes()
    tables = lo.read_stream(data, str(tmp_path / "s.toml"))
    table = tables["R"].to_arrow()
    table.validate(full=True)
    assert table.column("NAME").to_pylist() == [words[i % len(words)].ljust(12) for i in range(n)]
    assert lo.write_stream(tables, str(tmp_path / "s.toml")) == data


def test_convert_stream_says_the_signs_of_copybook_types(tmp_path, capsys):
    """--stream with a copybook type: the count per field of signs the way back writes
    otherwise, read from the records at their offsets (RDW prefix), as --copybook says it."""
    import struct

    (tmp_path / "d.cob").write_text("       01 D.\n          05 SEG PIC X.\n          05 AMT PIC S9(3) COMP-3.\n")
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "d"\n[[section]]\nframing = "rdw"\ntag = { offset = 0, size = 1 }\n'
        '[section.types.D]\ntag = "D"\ncopybook = "d.cob"\n'
    )
    bodies = [b"\xc4\x12\x3f", b"\xc4\x12\x3c", b"\xc4\x00\x0d", b"\xc4\x45\x6f"]
    data = tmp_path / "d.dat"
    data.write_bytes(b"".join(struct.pack(">HH", len(b) + 4, 0) + b for b in bodies))
    assert main(["convert", str(data), "--stream", str(spec), "--to", f"{tmp_path / 'out'}/"]) == 0
    assert "  3 values of AMT (D) will come back with another sign byte" in capsys.readouterr().out
    assert main(["convert", f"{tmp_path / 'out'}/", "--stream", str(spec), "--to", str(tmp_path / "b.dat")]) == 0
    assert (tmp_path / "b.dat").read_bytes() == data.read_bytes().replace(b"\x3f", b"\x3c").replace(
        b"\x0d", b"\x0c"
    ).replace(b"\x6f", b"\x6c")


def test_the_stream_sign_count_says_a_file_that_changed(tmp_path, capsys):
    """The sign count reads the records again at their offsets: a file cut meanwhile is a
    ConversionError saying so, not a short read counted as records."""
    import struct

    from layouts._cli.streams import _report_signs, _stream_of

    (tmp_path / "d.cob").write_text("       01 D.\n          05 SEG PIC X.\n          05 AMT PIC S9(3) COMP-3.\n")
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "d"\n[[section]]\nframing = "rdw"\ntag = { offset = 0, size = 1 }\n[section.types.D]\ntag = "D"\ncopybook = "d.cob"\n'
    )
    data = tmp_path / "d.dat"
    data.write_bytes(b"".join(struct.pack(">HH", 7, 0) + b"\xc4\x12\x3f" for _ in range(3)))
    assert main(["convert", str(data), "--stream", str(spec), "--to", f"{tmp_path / 'out'}/", "--quiet"]) == 0
    data.write_bytes(data.read_bytes()[:15])
    with pytest.raises(lo.ConversionError, match=r"d.dat: the file ends at byte 15, inside a D record .* it changed"):
        _report_signs(str(data), _stream_of(str(spec)), str(tmp_path / "out"), "parquet", {"D": (3, 21)})


def test_a_copybook_type_keeps_its_tail(tmp_path):
    """attack6: tail = "column" with a copybook type was a LayoutError about a raw void
    field (the tail's layout lost the copybook's encodings); now the bytes beyond the
    copybook's record are its _tail column, and the way back gives the file back."""
    import struct

    (tmp_path / "seg.cob").write_text(
        "       01 DTL.\n          05 SEG PIC X.\n          05 AMOUNT PIC S9(5)V99 COMP-3.\n"
    )
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[[section]]\nframing = "rdw"\ntag = { offset = 0, size = 1 }\ntail = "column"\n'
        '[section.types.D]\ntag = "D"\ncopybook = "seg.cob"\n'
    )
    bodies = ["D".encode("cp037") + bytes.fromhex("0012345C") + extra for extra in (b"EXTRA", b"", b"\x00\xff")]
    data = b"".join(struct.pack(">HH", len(b) + 4, 0) + b for b in bodies)
    tables = lo.read_stream(data, str(tmp_path / "s.toml"))
    rows = tables["D"].to_arrow().to_pylist()
    assert [(r["SEG"], str(r["AMOUNT"]), r["_tail"]) for r in rows] == [
        ("D", "123.45", b"EXTRA"),
        ("D", "123.45", b""),
        ("D", "123.45", b"\x00\xff"),
    ]
    assert lo.write_stream(tables, str(tmp_path / "s.toml")) == data


def test_a_copybook_that_is_no_regular_file_is_refused_at_once(tmp_path):
    """attack6: a copybook path that is a FIFO hung (Layout.from_copybook, inspect,
    convert), and a description's copybook = "/tmp" said "no such file"."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "book.cob"
    os.mkfifo(fifo)
    code = f"import layouts as lo\ntry:\n    lo.Layout.from_copybook({str(fifo)!r})\nexcept lo.LayoutError as e:\n    print(e)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (
        run.stdout
        == f"{str(fifo)!r} is a FIFO (named pipe), not a regular file; give the copybook file's path (or its text)\n"
    )
    for path, said in (
        (tmp_path, "is a directory"),
        ("/dev/zero", "is a character device, not a regular file"),
        (fifo, "is a FIFO"),
    ):
        (tmp_path / "d.toml").write_text(
            f'name = "s"\n[[section]]\nframing = "rdw"\ntag = {{ offset = 0, size = 1 }}\n'
            f'[section.types.D]\ntag = "D"\ncopybook = "{path}"\n'
        )
        with pytest.raises(lo.LayoutError, match=f"section\\[0\\].types.D.copybook: {path}: .*{said}"):
            lo.read_stream(b"", str(tmp_path / "d.toml"))
