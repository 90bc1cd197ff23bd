from evsched import Scheduler


def test_next_time_skips_cancelled_head():
    s = Scheduler()
    a = s.schedule(5, lambda: None)
    s.schedule(8, lambda: None)
    s.cancel(a)
    assert s.next_time() == 8
    assert len(s) == 1


def test_run_next_runs_first_live_event():
    s = Scheduler()
    fired = []
    a = s.schedule(5, fired.append, "a")
    s.schedule(8, fired.append, "b")
    s.cancel(a)
    assert s.run_next() is True
    assert fired == ["b"]
    assert s.now == 8


def test_everything_cancelled():
    s = Scheduler()
    ids = [s.schedule(t, lambda: None) for t in (1, 2, 3)]
    for i in ids:
        s.cancel(i)
    assert s.next_time() is None
    assert s.run_next() is False
    assert s.now == 0
    assert len(s) == 0


def test_simulation_loop_counts_only_real_events():
    s = Scheduler()
    fired = []
    handles = [s.schedule(t, fired.append, t) for t in range(10)]
    for h in handles[::2]:
        s.cancel(h)
    steps = 0
    while s.run_next():
        steps += 1
    assert fired == [1, 3, 5, 7, 9]
    assert steps == 5


def test_cancel_in_middle_of_heap():
    s = Scheduler()
    fired = []
    s.schedule(1, fired.append, 1)
    mid = s.schedule(2, fired.append, 2)
    s.schedule(3, fired.append, 3)
    s.cancel(mid)
    assert s.next_time() == 1
    s.run_until(3)
    assert fired == [1, 3]


def test_same_time_fifo_and_cancel_after_run():
    s = Scheduler()
    fired = []
    first = s.schedule(2, fired.append, "x")
    s.schedule(2, fired.append, "y")
    assert s.run_next() and fired == ["x"]
    assert s.cancel(first) is False
    assert s.next_time() == 2
    assert s.run_next() and fired == ["x", "y"]
    assert s.next_time() is None


def test_reschedule_after_cancel():
    s = Scheduler()
    fired = []
    h = s.schedule(4, fired.append, "old")
    s.cancel(h)
    s.schedule(4, fired.append, "new")
    assert s.next_time() == 4
    assert s.run_next()
    assert fired == ["new"]
    assert not s.run_next()
