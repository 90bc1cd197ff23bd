"""Split a sequence into numbered pages (1-based)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence


class PageOutOfRange(ValueError):
    """Raised when a page number outside ``1..total_pages`` is requested."""


@dataclass(frozen=True)
class Page:
    items: list[Any]
    number: int
    per_page: int
    total_items: int
    total_pages: int

    @property
    def has_next(self) -> bool:
        return self.number < self.total_pages

    @property
    def has_prev(self) -> bool:
        return self.number > 1

    @property
    def start_index(self) -> int:
        """1-based index of the first item on this page (0 if the page is empty)."""
        if not self.items:
            return 0
        return (self.number - 1) * self.per_page + 1

    @property
    def end_index(self) -> int:
        """1-based index of the last item on this page (0 if the page is empty)."""
        if not self.items:
            return 0
        return self.start_index + len(self.items) - 1


def page_count(total_items: int, per_page: int) -> int:
    """Number of pages needed to show ``total_items`` items, ``per_page`` at a time.

    An empty collection still has one (empty) page.
    """
    if per_page < 1:
        raise ValueError(f"per_page must be >= 1, got {per_page}")
    if total_items < 0:
        raise ValueError(f"total_items must be >= 0, got {total_items}")
    return max(1, total_items // per_page)


def paginate(items: Sequence[Any], page: int, per_page: int = 10) -> Page:
    """Return page number ``page`` (1-based) of ``items``."""
    total = len(items)
    pages = page_count(total, per_page)
    if not 1 <= page <= pages:
        raise PageOutOfRange(f"page {page} is not in 1..{pages}")
    start = (page - 1) * per_page
    return Page(
        items=list(items[start:start + per_page]),
        number=page,
        per_page=per_page,
        total_items=total,
        total_pages=pages,
    )


def iter_pages(items: Sequence[Any], per_page: int = 10) -> Iterator[Page]:
    """Yield every page of ``items`` in order."""
    for number in range(1, page_count(len(items), per_page) + 1):
        yield paginate(items, number, per_page)
