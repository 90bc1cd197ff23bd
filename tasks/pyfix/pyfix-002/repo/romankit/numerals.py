"""Conversion between integers and Roman numerals."""

MAX_VALUE = 3999

_NUMERALS = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]

_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(n):
    """Return the canonical Roman numeral for the integer *n* (1..3999)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"expected an int, got {type(n).__name__}")
    if not 0 < n < MAX_VALUE:
        raise ValueError(f"{n} is out of range (1..{MAX_VALUE})")
    parts = []
    for value, symbol in _NUMERALS:
        count, n = divmod(n, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(numeral):
    """Parse a Roman numeral (case-insensitive) and return its integer value.

    Only canonical numerals are accepted: ``"IIII"`` or ``"IC"`` raise
    ``ValueError`` even though their intended value is guessable.
    """
    if not isinstance(numeral, str):
        raise TypeError(f"expected a str, got {type(numeral).__name__}")
    text = numeral.strip().upper()
    if not text:
        raise ValueError("empty numeral")
    total = 0
    for i, char in enumerate(text):
        if char not in _VALUES:
            raise ValueError(f"invalid character {char!r} in {numeral!r}")
        value = _VALUES[char]
        following = _VALUES.get(text[i + 1]) if i + 1 < len(text) else None
        if following is not None and value < following:
            total -= value
        else:
            total += value
    if to_roman(total) != text:
        raise ValueError(f"non-canonical numeral {numeral!r}")
    return total


def is_roman(numeral):
    """Return True if *numeral* is a valid canonical Roman numeral."""
    try:
        from_roman(numeral)
    except (TypeError, ValueError):
        return False
    return True
