"""Damaged Arrow IPC and Parquet inputs: a fixed-seed corpus of mutated files converted
back to records, in subprocesses, must give a library error or success, never a signal.

The corpus: base tables with string, binary, large string, fixed-width, dictionary,
list, struct and C enum columns, written as Arrow IPC files (plain and LZ4), IPC streams
and Parquet (Snappy and plain), several batches or row groups each; every file is
mutated with a seeded generator (bytes flipped or overwritten, the file cut short,
bytes cut out of the middle, the footer hit, bits of the batches' data and
headers flipped). Each mutated file goes through
``layouts.convert(src, layout, dst)`` (records out) and, where pyarrow reads it,
``SoA.from_arrow(table, layout).to_aos()``. The files are spread over a few worker
subprocesses (this module run as a script); a worker that dies by a signal names the
file it was on, and the rest of its batch runs again in a new worker.

Run by hand with more files: ``LAYOUTS_FUZZ_FILES=5000 pytest tests/test_fuzz_arrow.py``.
"""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import layouts as lo

SEED = 20261123
FILES = int(os.environ.get("LAYOUTS_FUZZ_FILES", "1000"))
WORKERS = 4

ENUM_C = """
#include <stdint.h>
enum side { BUY = 1, SELL = 2, HOLD = 7 };
struct order { int32_t id; enum side side; char sym[8]; double px; };
"""


def _dtypes():
    inner = np.dtype([("x", "<i2"), ("y", "<f4")])
    return {
        "mixed": np.dtype(
            [
                ("id", "<i4"),
                ("name", "S8"),
                ("u", "U4"),
                ("px", "<f8"),
                ("pos", "<f4", (3,)),
                ("flag", "?"),
                ("ts", "<M8[us]"),
            ]
        ),
        "strings": np.dtype([("a", "S6"), ("b", "U3"), ("c", "S4"), ("n", ">i8")]),
        "nested": np.dtype([("k", "<u2"), ("p", inner), ("v", "<i4", (2,)), ("d", "U2")]),
    }


def _layouts():
    layouts = {name: lo.Layout.from_dtype(dt) for name, dt in _dtypes().items()}
    layouts["enum"] = lo.Layout.from_c(ENUM_C, "struct order")
    return layouts


FILL = {"mixed": {"px": -1.0, "id": 0}, "strings": {}, "nested": {}, "enum": {}}


def _tables(rows=60):
    """One base table per layout (names as in :func:`_layouts`)."""
    rng = np.random.default_rng(SEED)
    words = ["", "a", "bc", "xyz", "héé", "tick", "SYM01"]
    text = [words[i] for i in rng.integers(0, len(words), rows)]
    short = [w.encode()[:3].decode("utf-8", "ignore") for w in text]
    mixed = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int32)),
            "name": pa.array([w.encode()[:8] for w in text], pa.binary()),
            "u": pa.array([w[:4] for w in text], pa.string()),
            "px": pa.array([None if i % 7 == 3 else float(i) / 3 for i in range(rows)], pa.float64()),
            "pos": pa.array([[float(i), i + 0.5, -i] for i in range(rows)], pa.list_(pa.float32())),
            "flag": pa.array(rng.integers(0, 2, rows).astype(bool)),
            "ts": pa.array([None if i % 5 == 0 else i * 1000 for i in range(rows)], pa.timestamp("us")),
        }
    )
    strings = pa.table(
        {
            "a": pa.array([w.encode()[:6] for w in text], pa.large_binary()),
            "b": pa.array(short, pa.string()).dictionary_encode(),
            "c": pa.array([w.encode()[:4] for w in text], pa.binary()).dictionary_encode(),
            "n": pa.array(rng.integers(-(2**40), 2**40, rows), pa.int64()),
        }
    )
    nested = pa.table(
        {
            "k": pa.array(rng.integers(0, 60000, rows).astype(np.uint16)),
            "p": pa.StructArray.from_arrays(
                [pa.array(np.arange(rows, dtype=np.int16)), pa.array(np.linspace(0, 1, rows, dtype=np.float32))],
                names=["x", "y"],
            ),
            "v": pa.array([[i, -i] for i in range(rows)], pa.list_(pa.int32(), 2)),
            "d": pa.array([w[:2] for w in short], pa.large_string()),
        }
    )
    enum = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int32)),
            "side": pa.array([["BUY", "SELL", "HOLD"][i % 3] for i in range(rows)]).dictionary_encode(),
            "sym": pa.array([w.encode()[:8] for w in text], pa.binary()),
            "px": pa.array(np.arange(rows, dtype=np.float64)),
        }
    )
    return {"mixed": mixed, "strings": strings, "nested": nested, "enum": enum}


def _write(table, path, fmt):
    batches = table.to_batches(max_chunksize=len(table) // 3)
    if fmt == "ipc":
        with pa.ipc.new_file(path, table.schema) as w:
            for b in batches:
                w.write_batch(b)
    elif fmt == "ipc-lz4":
        with pa.ipc.new_file(path, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
            for b in batches:
                w.write_batch(b)
    elif fmt == "stream":
        with pa.ipc.new_stream(path, table.schema) as w:
            for b in batches:
                w.write_batch(b)
    else:
        pq.write_table(
            table, path, row_group_size=len(table) // 3, compression="snappy" if fmt == "parquet" else "none"
        )


FORMATS = ("ipc", "ipc-lz4", "stream", "parquet", "parquet-plain")


def _mutate(data, rng):
    """A damaged copy of ``data`` and what was done to it."""
    b = bytearray(data)
    op = rng.choice(["flip", "flip", "body", "body", "body", "overwrite", "truncate", "cut", "tail"])
    if op in ("flip", "body"):  # body: bits of the data and batch headers, not the file's own header and footer
        lo_, hi = (0, len(b)) if op == "flip" else (min(64, len(b) // 4), max(len(b) * 3 // 4, len(b) - 400))
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(lo_, hi)
            b[i] ^= 1 << rng.randrange(8)
    elif op == "overwrite":
        i = rng.randrange(len(b))
        n = rng.randint(1, 16)
        b[i : i + n] = bytes(rng.randrange(256) for _ in range(n))[: len(b) - i]
    elif op == "truncate":
        del b[rng.randrange(len(b)) :]
    elif op == "cut":
        i = rng.randrange(len(b))
        del b[i : i + rng.randint(1, 64)]
    else:  # the footer / metadata at the end of the file
        for _ in range(rng.randint(1, 3)):
            i = len(b) - 1 - rng.randrange(min(len(b), 400))
            b[i] = rng.randrange(256)
    return bytes(b), op


def build_corpus(directory, count, seed=SEED):
    """Write ``count`` mutated files into ``directory``; returns ``[(path, layout name)]``."""
    directory = Path(directory)
    rng = random.Random(seed)
    bases = []
    for name, table in _tables().items():
        for fmt in FORMATS:
            path = directory / f"base-{name}-{fmt}"
            _write(table, path, fmt)
            bases.append((name, fmt, path.read_bytes()))
    corpus = []
    for k in range(count):
        name, fmt, data = bases[k % len(bases)]
        damaged, op = _mutate(data, rng)
        path = directory / f"f{k:05d}-{name}-{fmt}-{op}"
        path.write_bytes(damaged)
        corpus.append((str(path), name))
    return corpus


# ------------------------------------------------------------------ the worker


def _read_whole(path):
    """The file as a pyarrow Table, or None where pyarrow itself cannot read it."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
        if head[:4] == b"PAR1":
            return pq.read_table(path)
        if head == b"ARROW1":
            return pa.ipc.open_file(path).read_all()
        return pa.ipc.open_stream(path).read_all()
    except Exception:  # noqa: BLE001 - pyarrow's own reading is not under test here
        return None


def _outcome(fn):
    try:
        fn()
        return "ok", ""
    except (lo.ConversionError, lo.LayoutError) as err:
        return "library", str(err)
    except Exception as err:  # noqa: BLE001 - what the test looks for
        return "bad", f"{type(err).__module__}.{type(err).__name__}: {err}"


def worker(jobs):
    """Convert each ``(path, layout name)``; print one JSON line per file."""
    import warnings

    warnings.simplefilter("error")
    layouts = _layouts()
    for i, (path, name) in enumerate(jobs):
        print(json.dumps({"start": i}), flush=True)
        layout, fill = layouts[name], FILL[name]
        out = path + ".records"
        kind, msg = _outcome(
            lambda: lo.convert(path, layout, out, fill=fill, overwrite=True, overlap=i % 2 == 0, chunk_bytes=512)
        )
        if kind == "library" and os.path.basename(path) not in msg:
            kind, msg = "bad", f"error does not name the file: {msg}"
        result = {"done": i, "convert": kind, "convert_msg": msg[:300]}
        table = _read_whole(path)
        if table is not None:
            kind, msg = _outcome(lambda: lo.SoA.from_arrow(table, layout, fill=fill).to_aos())
            result.update(from_arrow=kind, from_arrow_msg=msg[:300])
        if os.path.exists(out):
            os.unlink(out)
        print(json.dumps(result), flush=True)


def run_corpus(corpus, workers=WORKERS, timeout=300):
    """Run the corpus in ``workers`` subprocesses; returns ``(results, signals)``: per
    file its result dict, and ``[(path, exit code, stderr)]`` for files that killed a
    worker (or hung it past ``timeout`` seconds: exit code None)."""
    import tempfile

    results, signals = {}, []
    pending = [jobs for jobs in (corpus[i::workers] for i in range(workers)) if jobs]
    while pending:
        running = []
        for jobs in pending[:workers]:
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            proc = subprocess.Popen([sys.executable, __file__, json.dumps(jobs)], stdout=out, stderr=err, text=True)
            running.append((proc, jobs, out, err))
        pending = pending[workers:]
        for proc, jobs, out, err in running:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = None
            out.seek(0)
            err.seek(0)
            started = None
            for line in out.read().splitlines():
                item = json.loads(line)
                if "start" in item:
                    started = item["start"]
                else:
                    results[jobs[item["done"]][0]] = item
                    started = None
            if code != 0:
                if started is None:
                    raise AssertionError(f"a fuzz worker failed (exit {code}) between files:\n{err.read()[-3000:]}")
                signals.append((jobs[started][0], code, err.read()[-2000:]))
                if jobs[started + 1 :]:
                    pending.append(jobs[started + 1 :])  # the rest of its share, in a new worker
            out.close()
            err.close()
    return results, signals


@pytest.mark.slow
def test_damaged_arrow_inputs_never_crash(tmp_path):
    corpus = build_corpus(tmp_path, FILES)
    results, signals = run_corpus(corpus)
    assert not signals, "files that killed (or hung) the converting process:\n" + "\n".join(
        f"{path} (exit {code}):\n{err}" for path, code, err in signals
    )
    bad = [(path, r) for path, r in results.items() if "bad" in (r.get("convert"), r.get("from_arrow"))]
    assert not bad, "raw exceptions escaped:\n" + "\n".join(f"{p}: {r}" for p, r in bad[:20])
    assert len(results) == len(corpus)
    kinds = [r["convert"] for r in results.values()]
    # the corpus reaches both the errors and the records: not every mutation is caught at the door
    assert kinds.count("library") > len(corpus) // 4 and kinds.count("ok") > 0


def test_corpus_bases_convert(tmp_path):
    """The unmutated files of the corpus convert, both ways in, to the same records."""
    layouts, tables = _layouts(), _tables()
    for name, table in tables.items():
        want = lo.SoA.from_arrow(table, layouts[name], fill=FILL[name]).to_aos().to_numpy()
        for fmt in FORMATS:
            src, dst = tmp_path / f"{name}-{fmt}", tmp_path / f"{name}-{fmt}.bin"
            _write(table, src, fmt)
            lo.convert(src, layouts[name], dst, fill=FILL[name], chunk_bytes=512)
            got = np.fromfile(dst, dtype=layouts[name].dtype)
            assert got.tobytes() == want.tobytes(), (name, fmt)


if __name__ == "__main__":
    worker(json.loads(sys.argv[1]))
