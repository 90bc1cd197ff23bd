"""A trie whose nodes count how many stored words pass through them."""

from __future__ import annotations

from typing import Iterable, Iterator


class _Node:
    __slots__ = ("children", "terminal", "count")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.terminal = False
        self.count = 0  # number of stored words that have this node's prefix


class Trie:
    def __init__(self, words: Iterable[str] = ()) -> None:
        self._root = _Node()
        for word in words:
            self.insert(word)

    def _find(self, prefix: str) -> _Node | None:
        node = self._root
        for ch in prefix:
            node = node.children.get(ch)
            if node is None:
                return None
        return node

    def insert(self, word: str) -> bool:
        """Add ``word``. Returns False if it was already present."""
        if word in self:
            return False
        node = self._root
        node.count += 1
        for ch in word:
            node = node.children.setdefault(ch, _Node())
            node.count += 1
        node.terminal = True
        return True

    def remove(self, word: str) -> bool:
        """Remove ``word``. Returns False if it was not present."""
        if self._find(word) is None:
            return False
        node = self._root
        node.count -= 1
        for ch in word:
            child = node.children[ch]
            child.count -= 1
            if child.count == 0:
                # No other stored word goes through here: drop the whole branch.
                del node.children[ch]
                return True
            node = child
        node.terminal = False
        return True

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False
        node = self._find(word)
        return node is not None and node.terminal

    def __len__(self) -> int:
        return self._root.count

    def count_prefix(self, prefix: str) -> int:
        """Number of stored words that start with ``prefix``."""
        node = self._find(prefix)
        return node.count if node else 0

    def words_with_prefix(self, prefix: str) -> list[str]:
        node = self._find(prefix)
        return sorted(self._walk(node, prefix)) if node else []

    def _walk(self, node: _Node, prefix: str) -> Iterator[str]:
        if node.terminal:
            yield prefix
        for ch, child in node.children.items():
            yield from self._walk(child, prefix + ch)

    def longest_prefix_of(self, text: str) -> str | None:
        """The longest stored word that is a prefix of ``text``."""
        node, best = self._root, None
        if node.terminal:
            best = ""
        for i, ch in enumerate(text):
            node = node.children.get(ch)
            if node is None:
                break
            if node.terminal:
                best = text[:i + 1]
        return best
