import pytest

from pager import PageOutOfRange, iter_pages, page_count, paginate


def test_page_count_rounds_up():
    assert page_count(25, 10) == 3
    assert page_count(21, 10) == 3
    assert page_count(1, 10) == 1
    assert page_count(11, 1) == 11


def test_page_count_exact_and_empty():
    assert page_count(20, 10) == 2
    assert page_count(0, 10) == 1
    assert page_count(7, 7) == 1


def test_last_partial_page_is_reachable():
    items = list(range(25))
    page = paginate(items, 3, per_page=10)
    assert page.items == [20, 21, 22, 23, 24]
    assert page.total_pages == 3
    assert not page.has_next and page.has_prev
    assert (page.start_index, page.end_index) == (21, 25)


def test_has_next_before_partial_page():
    page = paginate(list(range(25)), 2, per_page=10)
    assert page.has_next


def test_iter_pages_covers_every_item():
    items = [f"item{i}" for i in range(17)]
    pages = list(iter_pages(items, per_page=5))
    assert [p.number for p in pages] == [1, 2, 3, 4]
    assert [x for p in pages for x in p.items] == items


def test_out_of_range_after_last_page():
    with pytest.raises(PageOutOfRange):
        paginate(list(range(25)), 4, per_page=10)
    with pytest.raises(PageOutOfRange):
        paginate([], 2)


def test_invalid_per_page():
    with pytest.raises(ValueError):
        page_count(5, 0)
