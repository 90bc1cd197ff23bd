"""romankit - Roman numeral conversion."""

from .numerals import MAX_VALUE, from_roman, is_roman, to_roman

__all__ = ["MAX_VALUE", "from_roman", "is_roman", "to_roman"]
