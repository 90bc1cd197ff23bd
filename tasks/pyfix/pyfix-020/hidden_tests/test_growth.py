import collections
import random

import pytest

from ringq import RingDeque


def test_grow_after_wraparound_append():
    d = RingDeque(capacity=4)
    for i in range(4):
        d.append(i)
    assert d.popleft() == 0
    d.append(4)  # wraps into slot 0
    d.append(5)  # full -> grows
    assert list(d) == [1, 2, 3, 4, 5]
    assert [d[i] for i in range(-5, 5)] == [1, 2, 3, 4, 5] * 2


def test_grow_after_wraparound_appendleft():
    d = RingDeque(capacity=4)
    d.append("b")
    d.append("c")
    d.appendleft("a")  # head wraps to the end of the buffer
    d.append("d")      # full
    d.appendleft("z")  # grows
    assert list(d) == ["z", "a", "b", "c", "d"]
    assert d.pop() == "d"
    assert d.popleft() == "z"


def test_mixed_appends_grow_repeatedly():
    d = RingDeque(capacity=2)
    expected = collections.deque()
    for i in range(40):
        if i % 3 == 0:
            d.appendleft(i)
            expected.appendleft(i)
        else:
            d.append(i)
            expected.append(i)
    assert list(d) == list(expected)
    assert len(d) == 40


def test_bfs_queue():
    adj = {i: [c for c in (2 * i + 1, 2 * i + 2) if c < 31] for i in range(31)}
    seen, order, queue = {0}, [], RingDeque([0], capacity=4)
    while len(queue):
        node = queue.popleft()
        order.append(node)
        for nxt in adj[node]:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    assert order == list(range(31))


def test_randomized_against_collections_deque():
    rng = random.Random(1234)
    for cap in (1, 2, 3, 5, 8):
        d = RingDeque(capacity=cap)
        ref = collections.deque()
        for step in range(400):
            op = rng.random()
            if op < 0.35:
                d.append(step)
                ref.append(step)
            elif op < 0.6:
                d.appendleft(step)
                ref.appendleft(step)
            elif op < 0.8 and ref:
                assert d.popleft() == ref.popleft()
            elif ref:
                assert d.pop() == ref.pop()
            assert len(d) == len(ref)
        assert list(d) == list(ref)
        if ref:
            assert d[-1] == ref[-1] and d[0] == ref[0]


def test_setitem_after_growth():
    d = RingDeque(capacity=3)
    for i in range(3):
        d.append(i)
    d.popleft()
    d.append(3)
    d.append(4)
    d[-1] = 40
    d[0] = 10
    assert list(d) == [10, 2, 3, 40]


def test_only_appends_still_work():
    d = RingDeque(range(10), capacity=1)
    assert list(d) == list(range(10))
    assert d.capacity >= 10


def test_clear_keeps_working():
    d = RingDeque(capacity=2)
    for i in range(5):
        d.append(i)
    d.clear()
    assert len(d) == 0 and list(d) == []
    d.appendleft(1)
    d.append(2)
    assert list(d) == [1, 2]
    with pytest.raises(IndexError):
        d[2]


def test_only_appendleft_many_growths():
    d = RingDeque(capacity=2)
    for i in range(33):
        d.appendleft(i)
    assert list(d) == list(range(32, -1, -1))
    assert d[0] == 32 and d[-1] == 0
