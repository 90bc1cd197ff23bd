from lrukit import LRUCache, memoize


def test_get_protects_from_eviction():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)
    assert "a" in c
    assert "b" not in c
    assert c.keys() == ["a", "c"]


def test_get_moves_key_to_most_recent():
    c = LRUCache(3)
    for k in "xyz":
        c.put(k, k.upper())
    c.get("x")
    c.get("y")
    assert c.keys() == ["z", "x", "y"]


def test_peek_and_contains_do_not_refresh():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.peek("a") == 1
    assert "a" in c
    c.put("c", 3)
    assert "a" not in c
    assert c.keys() == ["b", "c"]


def test_put_existing_refreshes():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    c.put("c", 3)
    assert c.keys() == ["a", "c"]
    assert c.get("a") == 10


def test_miss_does_not_insert():
    c = LRUCache(1)
    c.put("a", 1)
    assert c.get("b") is None
    assert c.keys() == ["a"]
    assert (c.hits, c.misses) == (0, 1)


def test_memoize_keeps_hot_key():
    calls = []

    @memoize(capacity=2)
    def f(x):
        calls.append(x)
        return x + 1

    f(0)
    for x in range(1, 6):
        f(0)  # hot key, used before every new one
        f(x)
    assert calls.count(0) == 1
    assert f.cache.hits == 5
