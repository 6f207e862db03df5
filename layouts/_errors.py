"""The exceptions ``layouts`` raises."""

__all__ = ["LayoutError", "ConversionError"]


class LayoutError(TypeError):
    """A record type (or one of its fields) has no supported Arrow mapping."""


class ConversionError(ValueError):
    """A value cannot be converted without changing it (overflow, null, length, encoding)."""
