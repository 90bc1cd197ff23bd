"""verscmp - compare dotted numeric version strings."""

from .version import compare, max_version, parse_version, satisfies, sort_versions

__all__ = ["compare", "max_version", "parse_version", "satisfies", "sort_versions"]
