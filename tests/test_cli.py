"""``layouts demo`` and the command's entry points (more in test_cli_options.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from layouts._cli import main


def test_demo_runs_and_round_trips(capsys, tmp_path):
    assert main(["demo", "--records", "2000", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "struct tick: 48 bytes per record" in out and "44:1  7 bits  venue" in out
    # the commands it runs are shown, and can be run again on the files it kept
    assert f"$ layouts convert {tmp_path}/tick.bin --struct {tmp_path}/tick.h:tick --string sym --null qty=-1" in out
    assert "converted 2,000 records" in out and "qty nulls: 40" in out and "round trip bit-exact: True" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back.bin", "tick.bin", "tick.h", "tick.parquet"]
    assert (
        main(
            [
                "convert",
                str(tmp_path / "tick.parquet"),
                "--struct",
                f"{tmp_path}/tick.h:tick",
                "--string",
                "sym",
                "--fill",
                "qty=-1",
                "--to",
                str(tmp_path / "again.bin"),
            ]
        )
        == 0
    )
    assert (tmp_path / "again.bin").read_bytes() == (tmp_path / "tick.bin").read_bytes()


def test_demo_in_a_temporary_directory(capsys):
    assert main(["demo", "--records", "100"]) == 0
    assert "`layouts demo --dir DIR` keeps them" in capsys.readouterr().out


def test_module_entry_point_and_bad_argument():
    run = subprocess.run([sys.executable, "-m", "layouts", "demo", "--records", "0"], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr == "layouts demo: error: --records must be >= 1, got 0 (see layouts demo --help)\n"


# ---------------------------------------------------------- docs/command.md runs

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "docs" / "command.md", ROOT / "README.md"]
CONSOLE = re.compile(r"^```console( one-command)?\n(.*?)^```$", re.S | re.M)
TIMES = re.compile(r"\d[\d,]*\.\d+ s, \d[\d,]*\.\d+ [GMk]B/s")


def console_commands(text):
    """``(command, expected output lines)`` of every ``$ `` line of the page's console blocks
    (in a ``console one-command`` block, the first line only: the output shows commands too)."""
    out = []
    for block in CONSOLE.finditer(text):
        for i, line in enumerate(block.group(2).splitlines()):
            if line.startswith("$ ") and (i == 0 or not block.group(1)):
                out.append((line[2:], []))
            else:
                out[-1][1].append(line)
    return out


def run_console(command, cwd):
    """A page's command in bash, standard output and error together, as the page shows them."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", COLUMNS="100")
    run = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return run.stdout.rstrip("\n").splitlines()


def matches(got, want):
    """Lines equal but for times and speeds; a ``...`` line in ``want`` stands for any lines."""
    got, want = [TIMES.sub("T", g.rstrip()) for g in got], [TIMES.sub("T", w.rstrip()) for w in want]
    if "..." not in want:
        return got == want
    k = want.index("...")
    head, tail = want[:k], want[k + 1 :]
    return got[:k] == head and len(got) >= k + len(tail) and (not tail or matches(got[len(got) - len(tail) :], tail))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_command_page_examples_print_what_the_page_shows(page, tmp_path):
    for command, want in console_commands(page.read_text()):
        got = run_console(command, tmp_path)
        assert matches(got, want), f"$ {command}\nprinted:\n" + "\n".join(got) + "\nthe page says:\n" + "\n".join(want)


@pytest.mark.slow
def test_a_terminal_as_standard_input_is_refused_and_options_come_first(tmp_path):
    """attack5: `layouts convert -` with a terminal as standard input blocked, then wrote an
    empty output (exit 0); a wrong option waited for standard input's first bytes."""
    import pty

    leader, follower = pty.openpty()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "layouts", "convert", "-", "--dtype", "[('a', 'u1')]", "--to", "o.parquet"],
            stdin=follower,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        os.close(leader)
        os.close(follower)
    assert run.returncode == 2 and "standard input is a terminal, not data" in run.stderr
    assert not (tmp_path / "o.parquet").exists()
    for flags, said in (
        (["--dtype", "i4,zz"], "--dtype"),
        (["--dtype", "[('a', '<i4')]", "--null", "a=zz"], "--null a=zz: not a value of field 'a'"),
        (["--dtype", "[('a', '<i4')]", "--null", "b=1"], "--null b=1: 'b' is not a leaf field"),
        (["--dtype", "[('a', '<i4')]", "--fill", "a=1"], "--fill applies when writing records"),
    ):
        slow = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE)  # a producer that sends nothing yet
        try:
            run = subprocess.run(
                [sys.executable, "-m", "layouts", "convert", "-", *flags, "--to", "o.parquet"],
                stdin=slow.stdout,
                capture_output=True,
                text=True,
                cwd=tmp_path,
                timeout=25,
            )
        finally:
            slow.kill()
            slow.wait()
            slow.stdout.close()
        # (at once, not after the producer's first bytes; attack5: --null waited for them)
        assert run.returncode in (1, 2) and said in run.stderr, run.stderr


def test_a_dtype_without_names_is_a_usage_error_in_the_commands_terms(capsys):
    """attack5: --dtype i4 gave Layout.from_dtype's advice (Python) and exit 1."""
    assert main(["convert", "x.bin", "--dtype", "i4", "--to", "x.parquet"]) == 2
    assert (
        "--dtype 'i4' has no named fields (it is one int32 value); records need names: --dtype"
        in capsys.readouterr().err
    )
