"""semverlib - semantic version parsing and ordering."""

from .compare import compare, latest, sort_versions
from .version import InvalidVersion, Version, parse

__all__ = ["InvalidVersion", "Version", "compare", "latest", "parse", "sort_versions"]
