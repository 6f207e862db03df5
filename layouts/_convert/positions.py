"""Errors named by where they are in the input: a fault of a records chunk with the record
number and byte position in the file, a problem of an Arrow part with the batch or row
group and the rows, and (:func:`whole_input`) every problem of the input at once."""

import re
from contextlib import contextmanager

from .._errors import ConversionError, LayoutError
from .._faults import forward_error

__all__ = ["record_position", "rows_named", "whole_input", "later_values"]


@contextmanager
def record_position(layout, first, name, offset):
    """Give a conversion fault of one chunk (the file's records ``first...``) the record
    number and byte position in the file."""
    try:
        yield
    except ConversionError as err:
        if getattr(err, "fault", None) is None:
            raise
        raise forward_error(layout, err.records, err.fault, first, name, offset) from None


_ROW = re.compile(r"\brow (\d+)\b")


def _input_rows(err, first):
    """A part's message with each row it names counted from the input's first row (the
    checks count from the part's)."""
    return _ROW.sub(lambda m: f"row {first + int(m.group(1))}", str(err)) if first else str(err)


@contextmanager
def rows_named(name, first, n, where=None):
    """Name the input, its batch or row group and its rows in an error about one part
    of an Arrow input."""
    try:
        yield
    except (LayoutError, ConversionError) as err:
        where = f"{where}, " if where else ""
        named = type(err)(f"{name}, {where}rows {first} to {first + n}: {_input_rows(err, first)}")
        named.__dict__.update(err.__dict__)  # problems and fixes (layouts._errors.Problems)
        raise named from err


def whole_input(err, parts, first, check):
    """``err``, a part's column problems (:class:`layouts._errors.Problems`), with those of
    the rest of the input that it does not have: the other parts are checked, not
    converted, so that one error names every problem and every option the input needs."""
    from .._errors import Problems

    if not getattr(err, "problems", None):  # (an error found converting a value has none)
        return err
    found = Problems()
    found.items = list(err.problems)
    seen = {}  # column -> the kinds of fix its problems so far need
    for column, e in found.items:
        seen.setdefault(column, set()).update(getattr(e, "fix", None) or {"": None})
    while True:
        part = None
        try:
            where, part = next(parts)
            check(part)
        except StopIteration:
            break
        except (ConversionError, LayoutError) as later:
            problems = getattr(later, "problems", None)
            if not problems:  # not a column problem (a damaged part): said once, and no further reading
                found.add(
                    None,
                    later
                    if part is None
                    else type(later)(f"{where}, rows {first} to {first + part.num_rows}: {_input_rows(later, first)}"),
                )
                break
            for column, e in problems:
                kinds = set(getattr(e, "fix", None) or {"": None})
                if not kinds <= seen.get(column, set()):
                    seen.setdefault(column, set()).update(kinds)
                    at = ConversionError(f"{where}, rows {first} to {first + part.num_rows}: {_input_rows(e, first)}")
                    at.fix = getattr(e, "fix", None)
                    found.add(column, at)
        first += part.num_rows
    return err if len(found.items) == len(err.problems) else found.error()


def later_values(err, parts, name, first, n):
    """``err``, raised writing the part of rows ``first..first + n`` of the Arrow input
    ``name`` as records (values its fields cannot take), with the value problems of the
    parts after it (``parts``: their SoAs) in the columns it does not name yet: one error
    for the whole input, each problem with its rows counted from the input's first."""
    from .._errors import Problems
    from .._soa import value_problems

    if not getattr(err, "problems", None):
        return err
    found = Problems()
    found.items = [
        (c, ConversionError(f"rows {first} to {first + n}: {_input_rows(e, first)}")) for c, e in err.problems
    ]
    named = {c for c, _ in err.problems}
    at = first + n
    try:
        for soa in parts:
            for column, e in value_problems(soa, named):
                found.add(column, ConversionError(f"rows {at} to {at + len(soa)}: {_input_rows(e, at)}"))
                named.add(column)
            at += len(soa)
            if len(named) >= len(soa.layout.fields):
                break
    except (ConversionError, LayoutError) as later:  # a later part that does not fit at all: said once
        found.add(None, later)
    if len(found.items) == len(err.problems):
        return err
    said = found.error()
    combined = ConversionError(f"{name}: {said}")
    combined.problems, combined.fixes = said.problems, said.fixes
    return combined
