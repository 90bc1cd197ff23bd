"""csvlite - a small CSV reader and writer."""

from .reader import CSVError, parse, parse_records
from .writer import dumps, format_row

__all__ = ["CSVError", "dumps", "format_row", "parse", "parse_records"]
