"""Tokenizer."""

import re
from dataclasses import dataclass

from .source import SourceMap

_TOKEN_SPEC = [
    ("NUMBER", r"\d+(?:\.\d+)?"),
    ("NAME", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("STRING", r'"(?:[^"\\\r\n]|\\.)*"'),
    ("NEWLINE", r"\r?\n"),
    ("SKIP", r"[ \t\f]+|#[^\r\n]*"),
    ("OP", r"==|!=|<=|>=|[-+*/%=<>(),.\[\]{}:]"),
    ("MISMATCH", r"."),
]
_MASTER = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _TOKEN_SPEC), re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    offset: int
    line: int
    col: int


class LexError(Exception):
    """A character that cannot start any token."""

    def __init__(self, message, line, col, source_line):
        self.line = line
        self.col = col
        self.source_line = source_line
        super().__init__(message)

    def __str__(self):
        caret = " " * (self.col - 1) + "^"
        return f"{self.args[0]} at line {self.line}, column {self.col}\n{self.source_line}\n{caret}"


def tokenize(text):
    """Return the list of tokens in *text*, ending with an ``EOF`` token."""
    source = SourceMap(text)
    tokens = []
    for match in _MASTER.finditer(text):
        kind = match.lastgroup
        if kind == "SKIP":
            continue
        line, col = source.position(match.start())
        if kind == "MISMATCH":
            raise LexError(f"unexpected character {match.group()!r}", line, col, source.line_text(line))
        tokens.append(Token(kind, match.group(), match.start(), line, col))
    line, col = source.position(len(text))
    tokens.append(Token("EOF", "", len(text), line, col))
    return tokens
