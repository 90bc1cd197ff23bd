"""Mapping character offsets to line/column positions."""

from bisect import bisect_right


class SourceMap:
    """Translate 0-based character offsets in *text* to 1-based (line, col)."""

    def __init__(self, text):
        self.text = text
        self._line_starts = [0]
        offset = 0
        for line in text.splitlines():
            offset += len(line) + 1
            self._line_starts.append(offset)

    @property
    def line_count(self):
        return len(self._line_starts)

    def position(self, offset):
        """Return the 1-based ``(line, col)`` of character *offset*."""
        if not 0 <= offset <= len(self.text):
            raise IndexError(f"offset {offset} outside of source")
        index = bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def line_text(self, line):
        """Return the text of 1-based *line* without its line terminator."""
        if not 1 <= line <= len(self._line_starts):
            raise IndexError(f"line {line} outside of source")
        start = self._line_starts[line - 1]
        end = self._line_starts[line] if line < len(self._line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")
