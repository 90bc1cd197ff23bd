"""linediff - line based diff and patch."""

from .lcs import opcodes
from .patch import HunkHeader, PatchError, apply_diff, parse_hunk_header
from .unified import group_opcodes, unified_diff

__all__ = ["HunkHeader", "PatchError", "apply_diff", "group_opcodes", "opcodes",
           "parse_hunk_header", "unified_diff"]
