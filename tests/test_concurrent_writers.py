"""Outputs whole or not at all under concurrency and kills: two writers (threads or
processes) of one destination end with one complete result, never a mix; readers never
see a partial file; SIGKILL at random moments leaves no temporary files (O_TMPFILE),
or only the documented, named ones (elsewhere)."""

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
from conftest import TICK, ticks

import layouts as lo
from layouts import _files

ENV = {**os.environ, "PYTHONPATH": os.getcwd()}
N = 20_000  # records per input: 960 kB, several batches of 200 kB
CHUNK = 200_000
TMP_NAME = re.compile(r"\.out\.arrow\.\d+\.[0-9a-f]{12}\.layouts-tmp")


@pytest.fixture
def two_inputs(tmp_path):
    """Two inputs whose outputs differ in every batch, and their tables."""
    tables = []
    for seed in (1, 2):
        a = ticks(N, seed=seed)
        a.tofile(tmp_path / f"in{seed}.bin")
        tables.append(lo.AoS(a).to_soa().to_arrow())
    return tables


def which(path, tables):
    """0 or 1: which input the file at ``path`` holds, whole (an assertion fails for a mix)."""
    got = pa.ipc.open_file(path).read_all()
    matches = [i for i, t in enumerate(tables) if got.equals(t)]
    assert len(matches) == 1, f"{path} is neither output whole"
    return matches[0]


def leftovers(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_temporary_names_are_unique_within_a_process():
    assert len({_files._tmp_name("out.arrow") for _ in range(1000)}) == 1000
    assert TMP_NAME.fullmatch(_files._tmp_name("out.arrow"))


def test_two_threads_writing_one_destination(tmp_path, two_inputs, temp_kind):
    dst = tmp_path / "out.arrow"
    for _ in range(3):  # replacing: both finish, the file is one of them whole
        barrier, errors = threading.Barrier(2), []

        def write(seed):
            barrier.wait()
            try:
                lo.convert(tmp_path / f"in{seed}.bin", TICK, dst, chunk_bytes=CHUNK, overwrite=True)
            except BaseException as err:  # noqa: BLE001 - checked below
                errors.append(err)

        threads = [threading.Thread(target=write, args=(s,)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        which(dst, two_inputs)
        assert leftovers(tmp_path) == []
    for _ in range(3):  # creating: one wins, the other is told the file is there
        dst.unlink()
        barrier, outcomes = threading.Barrier(2), {}

        def create(seed):
            barrier.wait()
            try:
                lo.convert(tmp_path / f"in{seed}.bin", TICK, dst, chunk_bytes=CHUNK)
                outcomes[seed] = "written"
            except lo.LayoutError as err:
                outcomes[seed] = str(err)

        threads = [threading.Thread(target=create, args=(s,)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [s for s, o in outcomes.items() if o == "written"]
        assert len(winners) == 1, outcomes
        loser = outcomes[3 - winners[0]]
        assert re.search(
            r"out.arrow (exists|appeared while converting \(another program wrote it\)); pass "
            r"overwrite=True \(--overwrite\)",
            loser,
        ), loser
        assert which(dst, two_inputs) == winners[0] - 1
        assert leftovers(tmp_path) == []


WRITER = """
import sys, numpy as np, layouts as lo
from layouts import _files
_files.UNNAMED = {unnamed}
seed, rounds = int(sys.argv[1]), int(sys.argv[2])
for _ in range(rounds):
    lo.convert(f"in{{seed}}.bin", np.dtype({descr!r}, align=True), "out.arrow", chunk_bytes={chunk}, overwrite=True)
"""


@pytest.mark.slow
def test_two_processes_writing_one_destination_while_it_is_read(tmp_path, two_inputs, temp_kind):
    code = WRITER.format(unnamed=temp_kind, descr=TICK.descr, chunk=CHUNK)
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(seed), "15"], cwd=tmp_path, env=ENV, stderr=subprocess.PIPE)
        for seed in (1, 2)
    ]
    seen, dst = set(), tmp_path / "out.arrow"
    try:
        while any(p.poll() is None for p in procs):  # a reader sees no file, or one output whole
            if dst.exists():
                seen.add(which(dst, two_inputs))
            time.sleep(0.005)
    finally:
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
    which(dst, two_inputs)
    assert seen and leftovers(tmp_path) == []


KILLED = """
import os, sys, numpy as np, layouts as lo
from layouts import _files
_files.UNNAMED = {unnamed}
dtype = np.dtype({descr!r}, align=True)
lo.convert("in1.bin", dtype, "warm.arrow", overwrite=True)
open("ready", "w").close()
while True:
    try:  # a new destination: linked in under its own name, in one call
        os.unlink("out.arrow")
    except FileNotFoundError:
        pass
    lo.convert("in1.bin", dtype, "out.arrow", chunk_bytes={chunk}, overlap=True)
    if {replace}:  # replaced: linked under a temporary name, then renamed over it
        lo.convert("in1.bin", dtype, "out.arrow", chunk_bytes={chunk}, overlap=False, overwrite=True)
"""


def kill_loop(tmp_path, tables, unnamed, replace, kills, seed):
    """Kill a process converting in a loop at random moments; after each kill the
    destination is absent or whole. Returns the leftover files of all the kills."""
    rng = random.Random(seed)
    code = KILLED.format(unnamed=unnamed, descr=TICK.descr, chunk=CHUNK, replace=replace)
    left = []
    for _ in range(kills):
        (tmp_path / "ready").unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=ENV, stderr=subprocess.PIPE)
        try:
            for _ in range(1200):
                if (tmp_path / "ready").exists() or proc.poll() is not None:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.25))
            assert proc.poll() is None, proc.stderr.read().decode()
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
        if (tmp_path / "out.arrow").exists():
            assert which(tmp_path / "out.arrow", tables) == 0
        names = leftovers(tmp_path)
        for name in names:  # only ever the documented name, and a whole output
            assert TMP_NAME.fullmatch(name), name
            left.append(name)
            (tmp_path / name).unlink()
    return left


@pytest.mark.slow
@pytest.mark.skipif(not _files.UNNAMED, reason="needs O_TMPFILE and /proc (Linux)")
def test_sigkill_at_random_moments_leaves_no_files(tmp_path, two_inputs):
    assert kill_loop(tmp_path, two_inputs, unnamed=True, replace=False, kills=8, seed=15) == []
    assert sorted(p.name for p in tmp_path.iterdir()) in (
        ["in1.bin", "in2.bin", "ready", "warm.arrow"],
        ["in1.bin", "in2.bin", "out.arrow", "ready", "warm.arrow"],
    )


@pytest.mark.slow
def test_sigkill_with_named_temporary_files_leaves_only_documented_names(tmp_path, two_inputs):
    """Where O_TMPFILE is not used, a kill may leave ``.NAME.PID.RANDOM.layouts-tmp``
    (docs/reliability.md: how to clean them); nothing else, and the destination whole."""
    left = kill_loop(tmp_path, two_inputs, unnamed=False, replace=True, kills=5, seed=4)
    assert all(TMP_NAME.fullmatch(n) for n in left)
