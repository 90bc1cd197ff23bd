import pytest

from ringq import RingDeque


def test_append_and_pop_both_ends():
    d = RingDeque([1, 2, 3])
    d.appendleft(0)
    assert d.pop() == 3
    assert d.popleft() == 0
    assert list(d) == [1, 2]


def test_grows_when_only_appending():
    d = RingDeque(capacity=2)
    for i in range(20):
        d.append(i)
    assert list(d) == list(range(20))
    assert d.capacity >= 20


def test_appendleft_within_capacity():
    d = RingDeque(capacity=4)
    for i in range(4):
        d.appendleft(i)
    assert list(d) == [3, 2, 1, 0]
    assert d[-1] == 0


def test_wraparound_without_growth():
    d = RingDeque(capacity=4)
    for i in range(4):
        d.append(i)
    d.popleft()
    d.popleft()
    d.append(4)
    d.append(5)
    assert list(d) == [2, 3, 4, 5]
    assert (d[0], d[-1]) == (2, 5)


def test_empty_errors():
    d = RingDeque()
    with pytest.raises(IndexError):
        d.pop()
    with pytest.raises(IndexError):
        d.popleft()
    with pytest.raises(IndexError):
        d[0]
