"""The exceptions ``layouts`` raises."""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["LayoutError", "ConversionError", "Problems", "merge_fixes", "fix_text"]


class LayoutError(TypeError):
    """A record type (or one of its fields) has no supported Arrow mapping."""


class ConversionError(ValueError):
    """A value cannot be converted without changing it (overflow, null, length, encoding).

    ``problems`` (``(column, error)`` pairs) and ``fixes`` (the keyword arguments that fix
    them) are filled by the checks of Arrow data before a conversion (``SoA.from_arrow``)
    and by the way back to records (a value a field cannot hold: one problem per column);
    an error of the way to Arrow has none: empty."""

    problems: "tuple | list" = ()
    fixes: "Mapping[str, Any]" = MappingProxyType({})


class Problems:
    """Every column's problem, raised as one ConversionError: one problem as it is, more
    as one message listing each with its fix and, at the end, every option they need.

    Each problem is a ConversionError whose ``fix`` (if any) is the keyword arguments
    that fix it: ``{"fill": {"qty": "value"}}``, ``{"cast": "parse"}``, ``{"truncate":
    True}``, ``{"time_unit": {"ts_ns": "ns"}}``, ``{"extra": ["idx"]}``. The one raised
    has ``problems`` (column, error) and ``fixes`` (all of them merged)."""

    def __init__(self):
        self.items = []
        self.partial = False  # True: there may be problems of more columns than these

    def add(self, column, err):
        self.items.append((column, err))

    def raise_all(self):
        if self.items:
            raise self.error()

    def error(self):
        """The one ConversionError for every problem (there is at least one)."""
        fixes = merge_fixes([getattr(err, "fix", None) or {} for _, err in self.items])
        if len(self.items) == 1:
            err = self.items[0][1]
        else:
            listed = "; ".join(f"({k}) {err}" for k, (_, err) in enumerate(self.items, 1))
            unfixed = sorted({column for column, err in self.items if not getattr(err, "fix", None)} - {None})
            tail = f"to convert, pass {fix_text(fixes)}" if fixes else ""
            if unfixed:
                tail += (" and " if tail else "") + (
                    f"change the data or the layout of {', '.join(map(repr, unfixed))}"
                    f" (no option fixes {'it' if len(unfixed) == 1 else 'them'})"
                )
            said = "the first of them" if self.partial else "all of them"
            err = ConversionError(f"{len(self.items)} problems with the Arrow data's columns, {said}: {listed}; {tail}")
        err.problems, err.fixes = list(self.items), fixes
        return err


def merge_fixes(fixes):
    """One dict of keyword arguments from several (dicts and lists merged, in order)."""
    out = {}
    for fix in fixes:
        for key, value in fix.items():
            if isinstance(value, dict):
                out.setdefault(key, {}).update(value)
            elif isinstance(value, list):
                out[key] = list(dict.fromkeys(out.get(key, []) + value))
            else:
                out[key] = value
    return out


def fix_text(fixes):
    """``fill={'qty': value}, cast='parse'``: the keyword arguments of ``fixes`` as text."""

    def one(key, value):
        if isinstance(value, dict):
            return (
                f"{key}={{"
                + ", ".join(f"{k!r}: {'value' if v == 'value' else repr(v)}" for k, v in value.items())
                + "}"
            )
        return f"{key}={value!r}"

    return ", ".join(one(k, v) for k, v in fixes.items())
