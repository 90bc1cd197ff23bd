"""A character-level tokenizer over printable ASCII, with PAD, BOS and EOS specials.

Ids 0, 1 and 2 are ``PAD``, ``BOS`` and ``EOS``; ids 3..97 are the 95 printable ASCII
characters 32 (space) .. 126 (``~``) in order, so ``vocab_size == 98``.
"""

from __future__ import annotations

from collections.abc import Sequence

_FIRST_CHAR = 32
_LAST_CHAR = 126
_N_SPECIALS = 3


class CharTokenizer:
    """Maps printable ASCII characters to ids and back.

    Attributes:
        PAD: id of the padding token.
        BOS: id of the begin-of-sequence token.
        EOS: id of the end-of-sequence token.
        vocab_size: number of ids (3 specials + 95 printable characters = 98).
    """

    PAD = 0
    BOS = 1
    EOS = 2
    vocab_size: int = _N_SPECIALS + (_LAST_CHAR - _FIRST_CHAR + 1)

    def encode(self, text: str) -> list[int]:
        """Encodes text to ids; no BOS or EOS is added.

        Args:
            text: any string; characters outside printable ASCII (32..126) become ``'?'``.

        Returns:
            One id per character.
        """
        unknown = ord("?") - _FIRST_CHAR + _N_SPECIALS
        ids: list[int] = []
        for ch in text:
            code = ord(ch)
            ids.append(code - _FIRST_CHAR + _N_SPECIALS if _FIRST_CHAR <= code <= _LAST_CHAR else unknown)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Decodes ids to text.

        Args:
            ids: token ids; decoding stops at the first ``EOS``, and ``PAD`` and ``BOS`` are skipped.

        Returns:
            The decoded text.

        Raises:
            ValueError: if an id is outside ``[0, vocab_size)``.
        """
        chars: list[str] = []
        for i in ids:
            i = int(i)
            if i == self.EOS:
                break
            if i in (self.PAD, self.BOS):
                continue
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            chars.append(chr(i - _N_SPECIALS + _FIRST_CHAR))
        return "".join(chars)
