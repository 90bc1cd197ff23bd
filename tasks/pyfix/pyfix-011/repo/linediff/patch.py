"""Parsing unified diff hunks and applying them."""

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """Raised when a diff is malformed or does not apply."""


@dataclass(frozen=True)
class HunkHeader:
    old: range  # 0-based indexes of the old-file lines the hunk covers
    new: range  # 0-based indexes of the new-file lines the hunk covers


def _to_range(start, length):
    count = 1 if length is None else int(length)
    first = int(start) - 1  # unified diffs number lines from 1
    return range(first, first + count)


def parse_hunk_header(line):
    """Parse an ``@@ -l[,s] +l[,s] @@`` line into a HunkHeader."""
    match = _HUNK.match(line)
    if not match:
        raise PatchError(f"not a hunk header: {line!r}")
    old_start, old_len, new_start, new_len = match.groups()
    return HunkHeader(_to_range(old_start, old_len), _to_range(new_start, new_len))


def apply_diff(lines, diff_lines):
    """Apply the unified diff *diff_lines* to *lines*; return the new lines."""
    result = []
    pos = 0
    diff_lines = list(diff_lines)
    k = 0
    while k < len(diff_lines):
        line = diff_lines[k]
        k += 1
        if not line.startswith("@@"):
            continue  # file headers ("---", "+++") and anything else between hunks
        header = parse_hunk_header(line)
        if header.old.start < pos:
            raise PatchError(f"overlapping hunk: {line!r}")
        result.extend(lines[pos : header.old.start])
        pos = header.old.start
        old_left, new_left = len(header.old), len(header.new)
        while old_left or new_left:
            if k >= len(diff_lines):
                raise PatchError(f"truncated hunk: {line!r}")
            body = diff_lines[k]
            k += 1
            marker, text = body[:1], body[1:]
            if marker in (" ", "-"):
                if not old_left or (marker == " " and not new_left):
                    raise PatchError(f"hunk {line!r} is longer than its header says")
                if pos >= len(lines) or lines[pos] != text:
                    raise PatchError(f"hunk {line!r} does not apply at line {pos + 1}")
                pos += 1
                old_left -= 1
                if marker == " ":
                    result.append(text)
                    new_left -= 1
            elif marker == "+" and new_left:
                result.append(text)
                new_left -= 1
            else:
                raise PatchError(f"unexpected line in hunk {line!r}: {body!r}")
    result.extend(lines[pos:])
    return result
