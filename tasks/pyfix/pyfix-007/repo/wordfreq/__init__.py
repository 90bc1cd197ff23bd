"""wordfreq - word frequency counting."""

from .counter import DEFAULT_STOPWORDS, WordCounter, top_words

__all__ = ["DEFAULT_STOPWORDS", "WordCounter", "top_words"]
