"""qsparse - query string helpers."""

from .query import build_query, get_first, parse_qs, parse_qsl

__all__ = ["build_query", "get_first", "parse_qs", "parse_qsl"]
