"""Hostile copybooks: random mutations of the Cobrix test copybooks, read in a child
process (a crash fails the test, not the run) with a fixed seed. Every one is read or
refused with a LayoutError, each in bounded time."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, random, sys, time, traceback
from pathlib import Path
from layouts import Layout, LayoutError
from layouts._cobol import read_copybook

seed, count, folder = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
books = [p.read_text() for p in sorted(folder.glob("*.cob"))]
WORDS = ["PIC", "PICTURE", "X(3)", "9(5)", "S9(4)V99", "COMP", "COMP-3", "COMP-1", "COMP-5", "BINARY", "OCCURS",
         "1", "0", "99999", "999999999", "2147483647", "OCCURS 99999999", "TO", "TIMES", "DEPENDING", "ON", "REDEFINES", "FILLER", "SYNC",
         "SIGN", "LEADING", "TRAILING", "SEPARATE", "VALUE", "'A'", '"', "'", ".", "..", "01", "05", "10", "66",
         "77", "88", "49", "50", "RENAMES", "THRU", "BLANK", "WHEN", "ZERO", "JUSTIFIED", "USAGE", "IS", "P(9)",
         "9(0)", "X(99999999999)", "V", "VPP9", "Z(4).99-", "CR", "(", ")", "-", "*>", "\t", "\x00", "\u00e9"]

def mutate(text, rng):
    lines = text.split("\n")
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(8)
        i = rng.randrange(len(lines)) if lines else 0
        if op == 0 and lines:  # a character changed
            line = lines[i]
            if line:
                j = rng.randrange(len(line))
                lines[i] = line[:j] + rng.choice("9XSVP()-.* '\"ACDZ0\t") + line[j + 1:]
        elif op == 1 and lines:  # a word inserted
            words = lines[i].split(" ")
            words.insert(rng.randrange(len(words) + 1), rng.choice(WORDS))
            lines[i] = " ".join(words)
        elif op == 2 and lines:  # a word dropped
            words = lines[i].split(" ")
            if words:
                del words[rng.randrange(len(words))]
            lines[i] = " ".join(words)
        elif op == 3 and lines:  # a line repeated
            lines.insert(i, lines[i])
        elif op == 4 and lines:  # a line dropped
            del lines[i]
        elif op == 5 and lines:  # column 7 changed
            line = lines[i].ljust(8)
            lines[i] = line[:6] + rng.choice("*/-D xX") + line[7:]
        elif op == 6:  # cut short
            text2 = "\n".join(lines)
            lines = text2[:rng.randrange(len(text2) + 1)].split("\n")
        else:  # two lines swapped
            j = rng.randrange(len(lines)) if lines else 0
            if lines:
                lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)

rng = random.Random(seed)
worst, kinds = 0.0, {"ok": 0, "LayoutError": 0}
for n in range(count):
    text = mutate(rng.choice(books), rng)
    t0 = time.perf_counter()
    try:
        read_copybook(text)
        if n % 5 == 0:  # and the Layout of it (encodings checked), for a fifth of them
            Layout.from_copybook(text, fillers="keep" if n % 2 else "skip")
        kinds["ok"] += 1
    except LayoutError as err:
        kinds["LayoutError"] += 1
        if "line" not in str(err) and "record" not in str(err) and "copybook" not in str(err):
            print(json.dumps({"vague": str(err), "text": text}))
            sys.exit(2)
    except Exception:
        print(json.dumps({"crash": traceback.format_exc(), "text": text}))
        sys.exit(1)
    worst = max(worst, time.perf_counter() - t0)
print(json.dumps({"worst": worst, **kinds}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [27, 2027])
def test_mutated_copybooks_give_layout_errors_only(seed):
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(seed), "1500", str(ROOT / "tests/data/cobrix")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] > 0 and result["LayoutError"] > 0  # both kinds of copybook were made
    assert result["worst"] < 5.0, result  # bounded: no mutation makes the reader crawl
