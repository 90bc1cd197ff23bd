"""Comparison of dotted numeric versions such as ``1.4.2`` or ``v2.0``.

Trailing zero components are not significant: ``1.2 == 1.2.0 == 1.2.0.0``.
"""

import functools
import re

_VERSION_RE = re.compile(r"^v?(\d+(?:\.\d+)*)$")
_CONSTRAINT_RE = re.compile(r"^(>=|<=|==|!=|>|<)\s*(\S+)$")


def parse_version(text):
    """Split a version string into its components: ``"v1.2.3"`` -> ``(1, 2, 3)``."""
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise ValueError(f"invalid version: {text!r}")
    return tuple(part for part in match.group(1).split("."))


def _key(text):
    parts = list(parse_version(text))
    while len(parts) > 1 and int(parts[-1]) == 0:
        parts.pop()
    return tuple(parts)


def compare(a, b):
    """Return -1, 0 or 1 depending on whether ``a`` is older, equal or newer than ``b``."""
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def sort_versions(versions, reverse=False):
    return sorted(versions, key=functools.cmp_to_key(compare), reverse=reverse)


def max_version(versions):
    versions = list(versions)
    if not versions:
        raise ValueError("max_version() of an empty sequence")
    return sort_versions(versions)[-1]


_CHECKS = {
    ">=": lambda c: c >= 0,
    "<=": lambda c: c <= 0,
    "==": lambda c: c == 0,
    "!=": lambda c: c != 0,
    ">": lambda c: c > 0,
    "<": lambda c: c < 0,
}


def satisfies(version, spec):
    """Check ``version`` against a comma separated spec such as ``">=1.2, <2"``."""
    for clause in spec.split(","):
        clause = clause.strip()
        if not clause:
            continue
        match = _CONSTRAINT_RE.match(clause)
        if not match:
            raise ValueError(f"invalid constraint: {clause!r}")
        op, other = match.groups()
        if not _CHECKS[op](compare(version, other)):
            return False
    return True
