import pytest

from evsched import Scheduler


def test_runs_in_time_order():
    s = Scheduler()
    out = []
    s.schedule(3, out.append, "c")
    s.schedule(1, out.append, "a")
    s.call_later(2, out.append, "b")
    s.run_until(10)
    assert out == ["a", "b", "c"]
    assert s.now == 10


def test_cancel_before_run_until():
    s = Scheduler()
    out = []
    h = s.schedule(1, out.append, "x")
    assert s.cancel(h)
    assert not s.cancel(h)
    s.run_until(5)
    assert out == [] and len(s) == 0


def test_run_next_without_cancellation():
    s = Scheduler()
    out = []
    s.schedule(4, out.append, 4)
    assert s.run_next() and out == [4] and s.now == 4
    assert not s.run_next()


def test_no_scheduling_in_the_past():
    s = Scheduler(start=10)
    with pytest.raises(ValueError):
        s.schedule(5, print)
