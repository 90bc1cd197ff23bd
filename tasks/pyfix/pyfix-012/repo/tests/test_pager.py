import pytest

from pager import PageOutOfRange, iter_pages, paginate


def test_first_page():
    page = paginate(list(range(30)), 1, per_page=10)
    assert page.items == list(range(10))
    assert page.has_next and not page.has_prev
    assert (page.start_index, page.end_index) == (1, 10)


def test_exact_multiple():
    pages = list(iter_pages(list("abcdef"), per_page=3))
    assert [p.items for p in pages] == [["a", "b", "c"], ["d", "e", "f"]]


def test_empty_sequence_has_one_page():
    page = paginate([], 1)
    assert page.items == [] and page.total_pages == 1


def test_page_zero_rejected():
    with pytest.raises(PageOutOfRange):
        paginate([1, 2, 3], 0)
