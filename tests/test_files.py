"""read_records: memory-mapped legacy files, header offsets, partial records, streams."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import TICK, ticks
from cprobe import CC, run_c

import layouts as lo
from layouts import _files

HEADER = "#include <stdint.h>\nstruct rec { int64_t id; double x; uint16_t flags:4, kind:12; char tag[6]; };\n"
WRITER = (
    HEADER
    + r"""
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "wb");
    fwrite("HDR16bytes......", 1, 16, f);             /* a 16-byte file header */
    for (int i = 0; i < 500; i++) {
        struct rec r; memset(&r, 0, sizeof r);
        r.id = 1000 + i; r.x = i / 4.0; r.flags = i % 16; r.kind = (i * 37) % 4096;
        snprintf(r.tag, sizeof r.tag, "t%d", i % 1000);
        fwrite(&r, sizeof r, 1, f);
    }
    fclose(f);
    printf("%zu\n", sizeof(struct rec));
    return 0;
}
"""
)


@pytest.fixture
def c_file(tmp_path):
    if CC is None:
        pytest.skip("no C compiler on this machine")
    path = tmp_path / "recs.bin"
    size = int(run_c(WRITER, str(path)))
    return path, lo.Layout.from_c(HEADER, "struct rec", bytes_as="string"), size


def test_a_file_written_by_c_is_mapped_not_read(c_file):
    path, layout, size = c_file
    assert layout.itemsize == size
    aos = lo.read_records(path, layout, offset=16)
    assert isinstance(aos.array, np.memmap) and len(aos) == 500
    t = aos.to_soa().to_arrow()
    assert t.column("id").to_pylist() == list(range(1000, 1500))
    assert t.column("kind").to_pylist()[:3] == [0, 37, 74] and t.column("tag").to_pylist()[-1] == "t499"
    part = lo.read_records(path, layout, offset=16 + 10 * size, count=5)
    assert part.to_soa().to_arrow().column("id").to_pylist() == [1010, 1011, 1012, 1013, 1014]
    with open(path, "rb") as f:  # an open file maps too
        assert isinstance(lo.read_records(f, layout, offset=16).array, np.memmap)


def test_sizes_that_do_not_add_up_are_named(c_file):
    path, layout, size = c_file
    total = 16 + 500 * size
    with pytest.raises(
        lo.LayoutError,
        match=rf"recs.bin is {total} bytes: after the 0-byte header that is "
        rf"{total // size} records of {size} bytes and {total % size} bytes "
        rf"left over; check the layout",
    ):
        lo.read_records(path, layout)
    with pytest.warns(UserWarning, match=rf"{total % size} bytes left over; skipped those"):
        aos = lo.read_records(path, layout, trailing="ignore")
    assert len(aos) == total // size
    with pytest.raises(
        lo.ConversionError, match=r"holds 500 whole records of .* count=501 asks for more: give count=500 or fewer"
    ):
        lo.read_records(path, layout, offset=16, count=501)
    with pytest.raises(lo.LayoutError, match=rf"shorter than the {total + 1}-byte header offset"):
        lo.read_records(path, layout, offset=total + 1)
    with pytest.raises(lo.LayoutError, match=r"cannot read records from '.*nope.bin': No such file"):
        lo.read_records(path.parent / "nope.bin", layout)


@pytest.mark.slow
def test_streams_and_empty_files(tmp_path):
    dtype = np.dtype([("a", "<i4"), ("b", "<f4")])
    data = np.array([(1, 0.5), (2, 1.5)], dtype).tobytes()
    assert lo.read_records(io.BytesIO(data), dtype).to_soa().to_arrow().column("a").to_pylist() == [1, 2]
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert len(lo.read_records(empty, dtype)) == 0
    code = (
        "import sys, numpy as np, layouts as lo; "
        "print(lo.read_records(sys.stdin.buffer, np.dtype([('a', '<i4'), ('b', '<f4')])).to_numpy()['a'].sum())"
    )
    run = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True)
    assert run.stdout.strip() == b"3"
    with pytest.raises(lo.LayoutError, match=r"open it with 'rb'"):
        lo.read_records(io.StringIO("text"), dtype)


def test_output_blocks_are_reserved_ahead_and_given_back(tmp_path):
    path = tmp_path / "out.bin"
    with open(path, "wb") as f:
        blocks = _files.BlockReservation(path)
        blocks.ahead(8 << 20)
        reserved = blocks.fd is not None  # False where the system or filesystem refuses
        if reserved:
            assert os.stat(path).st_blocks * 512 >= 8 << 20
        assert os.stat(path).st_size == 0  # the size does not move
        f.write(b"x" * 100_000)
        f.flush()
        blocks.close()
    assert path.stat().st_size == 100_000
    assert path.stat().st_blocks * 512 < 1 << 20  # what was not written is given back
    assert path.read_bytes() == b"x" * 100_000


def test_convert_writes_the_same_files_where_blocks_cannot_be_reserved(tmp_path, monkeypatch):
    a = ticks(5_000)
    src = tmp_path / "ticks.bin"
    a.tofile(src)
    outputs = {}
    for refused in (False, True):
        if refused:  # as fallocate answers on a filesystem without it
            monkeypatch.setattr(_files, "_FALLOCATE", lambda *args: -1)
        arrow, back = tmp_path / f"{refused}.arrow", tmp_path / f"{refused}.bin"
        lo.convert(src, TICK, arrow, chunk_bytes=50_000)
        lo.convert(arrow, TICK, back, chunk_bytes=30_000)
        assert arrow.stat().st_blocks * 512 < arrow.stat().st_size + (1 << 20)
        outputs[refused] = arrow.read_bytes(), back.read_bytes()
    assert outputs[False] == outputs[True]
    assert outputs[True][1] == a.tobytes()


def test_blocks_can_be_reserved_through_a_descriptor(tmp_path):
    """An output written through a descriptor (an unnamed O_TMPFILE file has no path):
    the reservation works on a duplicate and leaves the caller's descriptor open."""
    path = tmp_path / "out.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        blocks = _files.BlockReservation(fd)
        assert blocks.fd is None or blocks.fd != fd
        blocks.ahead(4 << 20)
        os.write(fd, b"y" * 1000)
        blocks.close()
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    assert path.read_bytes() == b"y" * 1000 and path.stat().st_blocks * 512 < 1 << 20
