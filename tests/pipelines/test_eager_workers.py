"""The eager executor's worker processes: the outputs, order and counters of one process.

Each test runs real worker processes (``python -m pipelines.eager_workers``). A lake folded
with workers equals the one Beam's runner folds in ``test_log_pipeline``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics

from pipelines.eager import EagerPipeline
from pipelines.eager_workers import WorkerFailed, WorkerPool, shared_pool

MAIN = os.getpid()


class _Where(beam.DoFn):
    """x -> (x, x * x, the pid that ran it); counts elements and odd ones."""

    eager_parallel = True

    def __init__(self, die_on: int | None = None, raise_on: int | None = None) -> None:
        self.die_on = die_on
        self.raise_on = raise_on
        self.home = os.getpid()  # (made here, pickled: a worker imports this module with its own pid)
        self.seen = Metrics.counter("test", "seen")
        self.odd = Metrics.counter("test", "odd")

    def process(self, x: int) -> Any:
        if os.getpid() != self.home and x == self.die_on:
            os._exit(9)  # a worker killed while it holds this element
        if x == self.raise_on:
            raise ValueError(f"element {x} is bad")
        self.seen.inc()
        if x % 2:
            self.odd.inc()
        yield x, x * x, os.getpid()


class _Unpicklable(Exception):
    def __reduce__(self) -> Any:
        raise TypeError("this exception does not cross processes")


class _RaisesUnpicklable(beam.DoFn):
    eager_parallel = True

    def process(self, x: int) -> Any:
        raise _Unpicklable(f"element {x}")


class _Sequential(_Where):
    eager_parallel = False


def _exit_codes(pool: WorkerPool, within_s: float = 10.0) -> list[int]:
    """Exit codes of the pool's workers that have exited, once one has (within ``within_s``).

    A worker whose pipe closed is exiting; the kernel may not have reaped it yet.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        codes = [c for w in pool._workers if (c := w.proc.poll()) is not None]
        if codes:
            return codes
        time.sleep(0.01)
    return []


def _step(fn: beam.DoFn) -> bytes:
    """A step as the executor sends it to the workers."""
    return beam.internal.pickler.dumps((fn, (), {}))  # type: ignore[attr-defined, no-any-return]


def _run(pool: WorkerPool | None, fn: beam.DoFn, n: int) -> tuple[list[Any], dict[str, int]]:
    p = EagerPipeline(pool)
    out = p | beam.Create(range(n)) | beam.ParDo(fn)
    return list(out.elements), p.counters


def test_workers_give_the_outputs_order_and_counters_of_one_process() -> None:
    alone, alone_counters = _run(None, _Where(), 200)
    pool = shared_pool(2)
    assert pool is not None
    before = pool.shipped
    spread, counters = _run(pool, _Where(), 200)
    assert [o[:2] for o in spread] == [o[:2] for o in alone] == [(x, x * x) for x in range(200)]
    assert counters == alone_counters == {"test.seen": 200, "test.odd": 100}
    assert pool.shipped > before
    # a step that is not marked pure never leaves this process
    sequential, _ = _run(pool, _Sequential(), 50)
    assert {pid for *_, pid in sequential} == {MAIN}


def test_only_the_workers_run_elements_when_the_driver_does_not_share() -> None:
    pool = shared_pool(2)
    assert pool is not None
    results, counters = pool.map(
        _step(_Where()),
        list(range(30)),
        "test",
        local=lambda x: pytest.fail("the driving process ran an element"),  # type: ignore[arg-type]
        share=False,
    )
    assert [r[0][:2] for r in results] == [(x, x * x) for x in range(30)]
    assert MAIN not in {r[0][2] for r in results}
    assert counters == {"test.seen": 30, "test.odd": 15}


def test_a_worker_that_dies_loses_no_element_and_is_replaced() -> None:
    with WorkerPool(2) as pool:
        pickled = _step(_Where(die_on=7))
        before = {w.proc.pid for w in pool.workers()}
        run_here = _Where()
        results, _ = pool.map(
            pickled, list(range(60)), "t", local=lambda x: list(run_here.process(x)), share=False
        )
        # element 7's bundle ran in this process (where it does not die); no element is lost
        assert [r[0][:2] for r in results] == [(x, x * x) for x in range(60)]
        assert MAIN in {r[0][2] for r in results}
        assert _exit_codes(pool) == [9]  # the worker that took element 7 died; the other lives
        alive = pool.workers()
        assert len(alive) == 2 and all(w.alive() for w in alive)  # the dead one replaced
        assert len(before & {w.proc.pid for w in alive}) == 1
        # the pipeline's way: the same outputs and counters as one process
        spread, counters = _run(pool, _Where(die_on=7), 60)
        assert [o[:2] for o in spread] == [(x, x * x) for x in range(60)]
        assert counters == {"test.seen": 60, "test.odd": 30}


def test_an_exception_in_a_worker_is_raised_by_the_driver() -> None:
    with WorkerPool(1) as pool:
        pickled = _step(_Where(raise_on=11))
        with pytest.raises(ValueError, match="element 11 is bad"):
            pool.map(pickled, list(range(20)), "t", local=lambda x: [], share=False)
        unpicklable = _step(_RaisesUnpicklable())
        with pytest.raises(WorkerFailed, match="_Unpicklable: element 0"):
            pool.map(unpicklable, [0, 1], "t", local=lambda x: [], share=False)
        # the worker lives on
        ok, _ = pool.map(
            _step(_Where()),
            [3], "t", local=lambda x: [], share=False,
        )  # fmt: skip
        assert ok[0][0][:2] == (3, 9)


class _DiesInWorkers(beam.DoFn):
    eager_parallel = True

    def __init__(self) -> None:
        self.home = os.getpid()

    def process(self, x: int) -> Any:
        if os.getpid() != self.home:
            os._exit(3)
        yield x


def test_a_pool_whose_workers_keep_dying_stops_starting_them() -> None:
    with WorkerPool(2) as pool:
        pickled = _step(_DiesInWorkers())
        run_here = _DiesInWorkers()
        for _ in range(6):  # two workers lost a map: the pool gives up after eight
            results, _ = pool.map(
                pickled, list(range(12)), "t", lambda x: list(run_here.process(x)), share=False
            )
            assert [r for rs in results for r in rs] == list(range(12))  # every element, in order
        assert pool.workers() == []
        assert pool.lost >= 8


class _Chatty(beam.DoFn):
    """Prints to stdout through Python and through fd 1, and outputs what it is given."""

    eager_parallel = True

    def __init__(self) -> None:
        self.home = os.getpid()

    def process(self, x: Any) -> Any:
        print("a step's print", x)
        os.write(1, b"a library's write to fd 1\n")
        if os.getpid() != self.home and x == "lock":
            yield threading.Lock()  # (an output that cannot cross back)
            return
        yield x


def test_what_cannot_cross_runs_in_the_driving_process_and_prints_do_not_corrupt_replies(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with WorkerPool(1) as pool:
        pickled = _step(_Chatty())
        here = _Chatty()
        lock = threading.Lock()  # an element that does not pickle: its bundle stays here
        elements: list[Any] = ["a", "b", lock, "lock", "c"]  # "lock": an output that does not pickle
        results, _ = pool.map(pickled, elements, "t", lambda x: list(here.process(x)), share=False)
        assert results == [["a"], ["b"], [lock], ["lock"], ["c"]]
        assert "cannot be sent to a worker" in caplog.text and "outputs do not pickle" in caplog.text
        assert pool.workers() and pool.lost == 0  # the worker stays
        again, _ = pool.map(pickled, ["x", "y"], "t", lambda x: pytest.fail("ran here"), share=False)
        assert again == [["x"], ["y"]]


def _load_in(pid: int) -> str:
    if os.getpid() != pid:
        raise ImportError("this element loads only in the process that made it")
    return "loaded"


class _LoadsOnlyHere:
    """Pickles anywhere, loads only in the driving process (a class of a test's ``__main__``)."""

    def __reduce__(self) -> Any:
        return _load_in, (MAIN,)


class _TwoArguments(Exception):
    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")  # (pickles as one argument: does not load again)


class _RaisesTwoArguments(beam.DoFn):
    eager_parallel = True

    def process(self, x: int) -> Any:
        raise _TwoArguments(f"element {x}", "bad")


class _Client:
    def __reduce__(self) -> Any:
        raise TypeError("a client does not pickle")


class _SetsUpAClient(_Where):
    """A step whose set-up makes what does not pickle (Beam pickles steps before theirs)."""

    def setup(self) -> None:
        self.client = _Client()


def test_a_worker_survives_what_it_cannot_load_ctrl_c_and_exceptions_that_do_not_rebuild() -> None:
    with WorkerPool(1) as pool:
        (worker,) = pool.workers()
        pickled = _step(_Where())
        # an element that does not load in the worker: its bundle runs here, the worker stays
        results, _ = pool.map(pickled, [_LoadsOnlyHere()], "t", lambda x: ["here"], share=False)
        assert results == [["here"]]
        # Ctrl-C at a terminal reaches the worker too: the driving process decides, the worker lives
        os.kill(worker.proc.pid, signal.SIGINT)
        time.sleep(0.2)
        results, _ = pool.map(pickled, [2, 3], "t", lambda x: pytest.fail("ran here"), share=False)
        assert [r[0][:2] for r in results] == [(2, 4), (3, 9)]
        # an exception that pickles but is not rebuilt by loading: its text crosses
        two = _step(_RaisesTwoArguments())
        with pytest.raises(WorkerFailed, match="_TwoArguments: element 0: bad"):
            pool.map(two, [0], "t", lambda x: [], share=False)
        assert pool.workers() == [worker] and worker.alive() and pool.lost == 0
        # a step whose set-up made a client is sent as it was before (each worker sets it up)
        spread, counters = _run(pool, _SetsUpAClient(), 10)
        assert [o[:2] for o in spread] == [(x, x * x) for x in range(10)]
        assert counters == {"test.seen": 10, "test.odd": 5}


def test_a_closed_pool_starts_no_worker_and_its_elements_run_here() -> None:
    pool = WorkerPool(1)
    pool.close()
    assert pool.workers() == []
    pickled = _step(_Where())
    results, counters = pool.map(pickled, [1, 2], "t", lambda x: [x], share=False)
    assert results == [[1], [2]] and counters == {} and pool.workers() == []
