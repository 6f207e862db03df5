"""The examples in README.md and docs/ run, and print what the page says they print.

Each ```python block of a page runs, in page order, in one interpreter per page, inside
an empty temporary directory. A ```text block that follows a python block with nothing
but "prints"/"output" between them is the expected output of that block (compared line
by line, trailing spaces ignored). Blocks marked ```python no-run (a GPU, a cluster)
are only compiled."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)

RUNNER = r"""
import contextlib, io, json, sys, textwrap
blocks = json.load(sys.stdin)
scope = {"__name__": "__docs__"}
for i, (code, expected, line) in enumerate(blocks):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(textwrap.dedent(code), f"<block at line {line}>", "exec"), scope)
    if expected is not None:
        got = [l.rstrip() for l in out.getvalue().rstrip().splitlines()]
        want = [l.rstrip() for l in textwrap.dedent(expected).rstrip().splitlines()]
        if got != want:
            sys.exit(f"block at line {line} printed:\n" + "\n".join(got) + "\nbut the page says:\n" + "\n".join(want))
"""


def blocks(page):
    """(code, expected output or None, line) of every runnable python block; compiles the rest."""
    text = page.read_text()
    found = list(FENCE.finditer(text))
    out = []
    for k, m in enumerate(found):
        info = m.group(2).split()
        if not info or info[0] != "python":
            continue
        line = text.count("\n", 0, m.start()) + 1
        code = "\n".join(l[len(m.group(1)) :] for l in m.group(3).splitlines())
        compile(code, f"{page.name}:{line}", "exec")
        if "no-run" in info[1:]:
            continue
        expected = None
        if k + 1 < len(found) and found[k + 1].group(2).strip() == "text":
            between = text[m.end() : found[k + 1].start()].strip().lower()
            if between in ("", "prints", "prints:", "output:", "it prints:", "it prints"):
                expected = "\n".join(l[len(found[k + 1].group(1)) :] for l in found[k + 1].group(3).splitlines())
        out.append((code, expected, line))
    return out


SLOW_PAGES = (
    "streams.md",
    "dask.md",
    "reliability.md",
)  # their examples take 2-10 s: in the full suite, not the fast loop


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW_PAGES else p for p in PAGES],
    ids=[p.name for p in PAGES],
)
def test_examples_run(page, tmp_path):
    todo = blocks(page)
    if not todo:
        return
    run = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(todo),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{page.name}: {run.stdout}\n{run.stderr}"


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) < 250
