"""Precedence (ordering) of semantic versions."""

from .version import parse


def _precedence_key(version):
    """Sort key implementing SemVer precedence; build metadata is ignored."""
    # A normal version has higher precedence than any pre-release of the
    # same major.minor.patch, hence the "no pre-release" flag before the tag.
    return (
        version.major,
        version.minor,
        version.patch,
        not version.prerelease,
        version.prerelease,
    )


def compare(a, b):
    """Return -1, 0 or 1 if *a* has lower, equal or higher precedence than *b*."""
    key_a, key_b = _precedence_key(parse(a)), _precedence_key(parse(b))
    return (key_a > key_b) - (key_a < key_b)


def sort_versions(versions, reverse=False):
    """Return *versions* (strings or Version objects) sorted by precedence.

    The items are returned unchanged; the sort is stable, so versions of equal
    precedence (e.g. differing only in build metadata) keep their order.
    """
    return sorted(versions, key=lambda v: _precedence_key(parse(v)), reverse=reverse)


def latest(versions, include_prerelease=False):
    """Return the highest version in *versions*, or None if there is none."""
    candidates = [v for v in versions if include_prerelease or not parse(v).is_prerelease]
    if not candidates:
        return None
    return max(candidates, key=lambda v: _precedence_key(parse(v)))
