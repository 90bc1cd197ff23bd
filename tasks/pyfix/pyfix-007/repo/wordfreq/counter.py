"""Counting words in text."""

import re
from collections import Counter

DEFAULT_STOPWORDS = {
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in",
    "is", "it", "of", "on", "or", "that", "the", "to", "was", "with",
}

_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")


class WordCounter:
    """Accumulate word counts over one or more texts."""

    def __init__(self, stopwords=None, min_length=1):
        self.stopwords = DEFAULT_STOPWORDS if stopwords is None else stopwords
        self.min_length = min_length
        self.counts = Counter()

    def add_stopwords(self, *words):
        """Ignore *words* from now on (in this counter)."""
        self.stopwords.update(word.casefold() for word in words)

    def tokens(self, text):
        """Yield the countable words of *text*, case-folded."""
        for match in _WORD.finditer(text):
            word = match.group().casefold().replace("\u2019", "'")
            if len(word) >= self.min_length and word not in self.stopwords:
                yield word

    def feed(self, text):
        """Count the words of *text*; returns self for chaining."""
        self.counts.update(self.tokens(text))
        return self

    def most_common(self, n=None):
        """Return ``(word, count)`` pairs by count descending, then word."""
        ranked = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        return ranked if n is None else ranked[:n]

    def reset(self):
        """Forget all counts (the stop-words are kept)."""
        self.counts.clear()


def top_words(text, n=10, stopwords=None, min_length=1):
    """Return the *n* most common words of *text*."""
    return WordCounter(stopwords, min_length).feed(text).most_common(n)
