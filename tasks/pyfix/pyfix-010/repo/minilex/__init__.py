"""minilex - a small tokenizer with source positions."""

from .lexer import LexError, Token, tokenize
from .source import SourceMap

__all__ = ["LexError", "SourceMap", "Token", "tokenize"]
