import pytest

from lrukit import LRUCache, memoize


def test_put_get_and_miss():
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1
    assert c.get("zz", "dflt") == "dflt"
    assert (c.hits, c.misses) == (1, 1)


def test_capacity_is_respected():
    c = LRUCache(3)
    for i in range(10):
        c.put(i, i)
    assert len(c) == 3
    assert c.keys() == [7, 8, 9]


def test_invalid_capacity():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_memoize_caches():
    calls = []

    @memoize(capacity=4)
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9 and square(3) == 9
    assert calls == [3]
