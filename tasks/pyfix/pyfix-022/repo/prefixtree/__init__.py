"""Counting trie."""

from .trie import Trie

__all__ = ["Trie"]
