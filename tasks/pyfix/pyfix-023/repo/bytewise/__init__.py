"""bytewise - tiny helpers for human readable byte sizes."""

from .units import UNITS, format_size, parse_size

__all__ = ["UNITS", "format_size", "parse_size"]
