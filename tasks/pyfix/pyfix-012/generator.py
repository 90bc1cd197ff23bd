"""Generated check of pyfix-012: page_count() / paginate() / iter_pages() count the last partial page.

Collections of drawn sizes are paged with drawn page sizes. About half of the sizes
are exact multiples of the page size, smaller than one page, or empty (the untouched
package gets those right: the issue says so), the rest leave a partial last page.
paginate() answers every field and property of the Page; a few page numbers past the
end (or below 1) must raise PageOutOfRange, as the Page docstring says.
Not drawn: invalid per_page or negative totals (the ValueError there is not the issue).
"""


def _sizes(rng):
    per_page = rng.choice([1, 2, 3, 5, 7, 10, 10, 12, 20, 25])
    r = rng.random()
    if r < 0.3:
        total = per_page * rng.randint(1, 8)  # exact multiple
    elif r < 0.42:
        total = rng.randint(0, per_page)  # at most one page (or empty)
    else:
        total = per_page * rng.randint(1, 8) + rng.randint(1, max(1, per_page - 1))
        if per_page == 1:
            total = rng.randint(1, 9)  # per_page 1 never leaves a partial page
    return total, per_page


def _items(rng, total):
    if rng.random() < 0.5:
        return list(range(total))
    return [rng.choice(["a", "b", "c", "result", "x"]) + str(i) for i in range(total)]


def cases(rng, n):
    out = []
    for _ in range(n):
        total, per_page = _sizes(rng)
        r = rng.random()
        if r < 0.3:
            out.append({"fn": "page_count", "total": total, "per_page": per_page})
        elif r < 0.75:
            pages = max(1, -(-total // per_page))
            x = rng.random()
            if x < 0.08:
                page = rng.choice([0, -1, pages + 1, pages + rng.randint(2, 5)])
            elif x < 0.55:
                page = pages  # the last page
            else:
                page = rng.randint(1, pages)
            out.append({"fn": "paginate", "items": _items(rng, total), "page": page, "per_page": per_page})
        else:
            out.append({"fn": "iter_pages", "items": _items(rng, min(total, 60)), "per_page": per_page})
    return out


def _page(p):
    return {
        "items": list(p.items),
        "number": p.number,
        "per_page": p.per_page,
        "total_items": p.total_items,
        "total_pages": p.total_pages,
        "has_next": p.has_next,
        "has_prev": p.has_prev,
        "start_index": p.start_index,
        "end_index": p.end_index,
    }


def call(case):
    from pager import iter_pages, page_count, paginate

    if case["fn"] == "page_count":
        return page_count(case["total"], case["per_page"])
    if case["fn"] == "paginate":
        return _page(paginate(list(case["items"]), case["page"], per_page=case["per_page"]))
    return [_page(p) for p in iter_pages(list(case["items"]), per_page=case["per_page"])]
