"""The exceptions ``layouts`` raises."""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["LayoutError", "ConversionError"]


class LayoutError(TypeError):
    """A record type (or one of its fields) has no supported Arrow mapping."""


class ConversionError(ValueError):
    """A value cannot be converted without changing it (overflow, null, length, encoding).

    ``problems`` (``(column, error)`` pairs) and ``fixes`` (the keyword arguments that fix
    them) are filled by the checks of Arrow data before a conversion (``SoA.from_arrow``);
    an error found while converting (a value the field cannot hold) has none: empty."""

    problems: "tuple | list" = ()
    fixes: "Mapping[str, Any]" = MappingProxyType({})
