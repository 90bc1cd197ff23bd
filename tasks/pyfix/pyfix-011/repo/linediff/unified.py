"""Unified diff output."""

from .lcs import opcodes


def group_opcodes(codes, n=3):
    """Split *codes* into hunks, each with at most *n* lines of context."""
    if not codes:
        return []
    codes = list(codes)
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n))

    groups, group = [], []
    for tag, i1, i2, j1, j2 in codes:
        # an unchanged stretch longer than 2n lines ends the current hunk
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    groups.append(group)
    return [g for g in groups if any(code[0] != "equal" for code in g)]


def _format_range(start, stop):
    """Format the 0-based half-open range [start, stop) as ``line[,count]``."""
    beginning = start + 1  # unified diffs number lines from 1
    length = stop - start
    if length == 1:
        return str(beginning)
    return f"{beginning},{length}"


def unified_diff(a, b, fromfile="a", tofile="b", n=3):
    """Return the lines of a unified diff between the line lists *a* and *b*."""
    lines = []
    for group in group_opcodes(opcodes(a, b), n):
        if not lines:
            lines.append(f"--- {fromfile}")
            lines.append(f"+++ {tofile}")
        first, last = group[0], group[-1]
        old_range = _format_range(first[1], last[2])
        new_range = _format_range(first[3], last[4])
        lines.append(f"@@ -{old_range} +{new_range} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                lines.extend("-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                lines.extend("+" + line for line in b[j1:j2])
    return lines
