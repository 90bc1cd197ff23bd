"""Formatting and parsing of byte sizes using binary (IEC) units.

All multiples are powers of 1024: 1 KiB = 1024 B, 1 MiB = 1024 KiB, ...
"""

import re

UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]

_FACTORS = {unit.lower(): 1024 ** i for i, unit in enumerate(UNITS)}
# Short forms accepted by parse_size ("10k", "2G", ...).
_FACTORS.update({"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4})

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def format_size(num_bytes, precision=1):
    """Return a human readable string for ``num_bytes``.

    >>> format_size(512)
    '512 B'
    >>> format_size(1536)
    '1.5 KiB'
    """
    if num_bytes < 0:
        return "-" + format_size(-num_bytes, precision)
    if num_bytes < 1024:
        return f"{int(num_bytes)} B"
    value = float(num_bytes)
    for unit in UNITS[1:]:
        value /= 1000
        if value < 1024 or unit == UNITS[-1]:
            return f"{value:.{precision}f} {unit}"
    raise AssertionError("unreachable")


def parse_size(text):
    """Parse strings such as ``"1.5 KiB"``, ``"10M"`` or ``"42"`` into bytes."""
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"invalid size: {text!r}")
    number, unit = match.groups()
    try:
        factor = _FACTORS[unit.lower()]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r} in {text!r}") from None
    return int(float(number) * factor)
