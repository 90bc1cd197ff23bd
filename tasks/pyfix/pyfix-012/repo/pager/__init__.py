"""In-memory pagination helpers."""

from .paginate import Page, PageOutOfRange, iter_pages, page_count, paginate

__all__ = ["Page", "PageOutOfRange", "iter_pages", "page_count", "paginate"]
