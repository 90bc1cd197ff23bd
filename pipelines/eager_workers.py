"""Worker processes that run the eager executor's pure steps beside the driving process.

The eager executor (:mod:`pipelines.eager`) applies a batch's graph in one
process, so on a machine of several cores the batch's heaviest steps (parsing
records, folding episodes) used one. A ``DoFn`` that declares itself a pure
function of its element (``eager_parallel = True``: no I/O, nothing kept between
elements, outputs and Beam counters only) has its elements spread over this
pool's processes *and* the driving process, which takes elements from the same
queue; outputs come back in element order and counters are added to the
pipeline's, so the result is the one the driving process alone would give.

Workers are plain ``python -m pipelines.eager_workers`` processes talking
length-prefixed pickles over their stdin/stdout: no ``fork`` of a process
whose Kafka and Delta threads are running, and no re-import of the caller's
``__main__`` (an unguarded script stays a script). A worker that dies or
cannot start is dropped and its element runs in the driving process, so a
batch never depends on the pool. One pool serves the whole process (every
batch of a ``--follow`` run); its workers end with it (they read EOF).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

log = logging.getLogger(__name__)

_HEADER = 8
_FN_CACHE = 8  # DoFns a worker keeps set up (a batch's graph has two parallel steps)
_PIPE_BYTES = 16 << 20  # what a pipe to a worker may buffer (capped by the system's maximum)
_BUNDLES_PER_PROCESS = 3  # bundles a map's elements are cut into, per process taking part
_GIVE_UP = 8  # workers lost before the pool starts no more (a worker that cannot import, say)
_SWITCH_S = 0.0005  # the GIL's switch interval while workers are fed (Python's default: 5 ms)
_COLLECT_EVERY = 64  # elements between the worker's cycle collections (its collector is off)


class WorkerLost(Exception):
    """A worker process died or could not start (its element runs in the driving process)."""


class NotShipped(WorkerLost):
    """A bundle a worker cannot take: its elements do not pickle, or the step does not load there.

    The bundle runs in the driving process, and the worker stays in the pool.
    """


class WorkerFailed(Exception):
    """An element's ``process`` raised in a worker an exception that cannot cross processes.

    Its message is the worker's traceback (an exception that can cross is raised as it is).
    """


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _send(stream: IO[bytes], data: bytes) -> None:
    stream.write(len(data).to_bytes(_HEADER, "little"))
    stream.write(data)
    stream.flush()


def _write(stream: IO[bytes], obj: Any) -> None:
    _send(stream, _dumps(obj))


def _receive(stream: IO[bytes]) -> bytes:
    head = stream.read(_HEADER)
    if len(head) < _HEADER:
        raise EOFError
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return data


def _read(stream: IO[bytes]) -> Any:
    return pickle.loads(_receive(stream))


def _widen(pipe: IO[bytes] | None) -> None:
    """Give a pipe the largest buffer the system allows (Linux; elsewhere as it is).

    An element (a thousand records, a chunk's table) is about a megabyte: through the default
    64 KiB pipe it is sixteen writes and reads, and each one's thread waits for the GIL the
    driving process's own step holds (a switch interval, 5 ms, each time).
    """
    if pipe is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(int(f.read()), _PIPE_BYTES)
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        pass


class _Worker:
    """One worker process and what it has been sent."""

    def __init__(self) -> None:
        env = dict(os.environ)
        # the caller's import path: the worker imports the same packages (a checkout, a venv)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.eager_workers"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        for pipe in (self.proc.stdin, self.proc.stdout):
            _widen(pipe)
        self.known: set[str] = set()
        self.lock = threading.Lock()
        self.dropped = False

    def call(
        self, key: str, fn_payload: bytes, elements: list[Any], label: str
    ) -> tuple[list[list[Any]], dict[str, int]]:
        """Run a bundle of elements; each one's outputs, and the bundle's counter increments."""
        sent = key in self.known
        try:
            message = _dumps((key, None if sent else fn_payload, elements, label))
        except Exception as exc:  # noqa: BLE001 - an element that cannot cross runs in the driving process
            raise NotShipped(f"a bundle of {label!r} cannot be sent to a worker: {exc!r}") from exc
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            try:
                _send(self.proc.stdin, message)
                self.known.add(key)
                status, *rest = _read(self.proc.stdout)
            except (EOFError, OSError, pickle.PickleError) as exc:
                self._drop()
                raise WorkerLost(f"eager worker {self.proc.pid} lost: {exc!r}") from exc
        if status == "ok":
            outputs, counters = rest
            return outputs, counters
        if status == "unusable":  # the worker could not load or set up the step: it stays healthy
            self.known.discard(key)
            raise NotShipped(f"eager worker {self.proc.pid} cannot run {label!r}: {rest[0]}")
        raised, text = rest
        if isinstance(raised, BaseException):
            raise raised
        raise WorkerFailed(text)

    def alive(self) -> bool:
        return not self.dropped and self.proc.poll() is None

    def _drop(self) -> None:
        """Never use this worker again (its replies can no longer be trusted to line up)."""
        self.dropped = True
        with contextlib.suppress(OSError):
            self.proc.kill()

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class WorkerPool:
    """``size`` worker processes, started on first use and kept for the process's life."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.shipped = 0
        """Elements the workers have run (the rest of every map ran in the driving process)."""
        self._gave_up = False
        self._closed = False
        self.lost = 0
        """Workers that died (after ``_GIVE_UP`` none is started again: the driving process does it all)."""

    def workers(self) -> list[_Worker]:
        """The live workers, started (or restarted) up to ``size``."""
        with self._lock:
            if self._closed:  # (replaced by a pool of another size while a map ran: it runs here)
                return []
            alive = [w for w in self._workers if w.alive()]
            self.lost += len(self._workers) - len(alive)
            self._workers = alive
            if self.lost >= _GIVE_UP:
                if not self._gave_up:
                    self._gave_up = True
                    log.warning(
                        "%d eager worker processes died; this process runs every step itself from now on "
                        "(see the workers' output above for why)",
                        _GIVE_UP,
                    )
                return alive
            while len(self._workers) < self.size:
                try:
                    self._workers.append(_Worker())
                except OSError as exc:  # (no process could be started: the driving process does it all)
                    log.warning("no eager worker process could be started: %s", exc)
                    break
            return list(self._workers)

    def map(
        self,
        fn_payload: bytes,
        elements: Sequence[Any],
        label: str,
        local: Callable[[Any], list[Any]],
        *,
        share: bool = True,
    ) -> tuple[list[list[Any]], dict[str, int]]:
        """Each element's outputs, in element order, and the workers' counter increments.

        ``local`` runs one element in this process (it counts its own counters); with
        ``share`` this thread takes work from the same queue as the workers do, else it
        only runs what a lost worker left (or everything, when no worker starts).
        Elements travel in bundles of consecutive ones, a few per process, so that a
        thousand small elements are not a thousand round trips.
        """
        key = hashlib.sha1(fn_payload).hexdigest()
        workers = self.workers()
        per = max(1, -(-len(elements) // ((len(workers) + 1) * _BUNDLES_PER_PROCESS)))
        bundles = [range(i, min(i + per, len(elements))) for i in range(0, len(elements), per)]
        results: list[list[Any] | None] = [None] * len(elements)
        counters: dict[str, int] = {}
        pending = bundles[::-1]  # popped from the end: element order
        lock = threading.Lock()
        errors: list[BaseException] = []
        orphans: list[range] = []  # bundles of workers that died: the driving process runs them

        def take() -> range | None:
            with lock:
                if errors or not pending:
                    return None
                return pending.pop()

        def drive(worker: _Worker) -> None:
            while (b := take()) is not None:
                try:
                    outputs, got = worker.call(key, fn_payload, [elements[i] for i in b], label)
                    for i, out in zip(b, outputs, strict=True):
                        results[i] = out
                    with lock:
                        self.shipped += len(b)
                        for name, n in got.items():
                            counters[name] = counters.get(name, 0) + n
                except WorkerLost as exc:
                    log.warning("%s; its elements run in the driving process", exc)
                    with lock:
                        orphans.append(b)
                    if isinstance(exc, NotShipped):
                        continue  # (the worker is well: it takes the next bundle)
                    return
                except BaseException as exc:  # noqa: BLE001 - re-raised by the driving thread
                    with lock:
                        errors.append(exc)
                    return

        threads = [threading.Thread(target=drive, args=(w,), daemon=True) for w in workers]
        started: list[threading.Thread] = []
        _quick_switches(True)
        try:
            for t in threads:
                t.start()
                started.append(t)
            while (share or not threads) and (b := take()) is not None:
                for i in b:
                    results[i] = local(elements[i])
        except BaseException as exc:
            with lock:
                errors.append(exc)
        finally:
            for t in started:
                t.join()
            _quick_switches(False)  # (restored whatever failed, a thread that did not start too)
        if errors:
            raise errors[0]
        for b in [*orphans, *pending]:  # (lost workers' bundles; with no worker left, the rest)
            for i in b:
                results[i] = local(elements[i])
        missed = sum(r is None for r in results)
        if missed:  # (every bundle is run by a worker, here, or raises: never a silent gap)
            raise RuntimeError(f"eager workers returned no outputs for {missed} elements of {label!r}")
        return results, counters  # type: ignore[return-value]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the workers (they finish the element they hold)."""
        with self._lock:
            self._closed = True
            for w in self._workers:
                w.close()
            self._workers = []


_switching = threading.Lock()
_feeding = 0
_saved_switch = 0.0


def _quick_switches(on: bool) -> None:
    """Shorten the GIL's switch interval while any map feeds workers (restored after the last).

    The threads feeding workers wait for the GIL the driving thread's own step holds; at
    Python's 5 ms a worker idled between bundles.
    """
    global _feeding, _saved_switch
    with _switching:
        if on:
            if _feeding == 0:
                _saved_switch = sys.getswitchinterval()
                sys.setswitchinterval(min(_saved_switch, _SWITCH_S))
            _feeding += 1
        else:
            _feeding -= 1
            if _feeding == 0:
                sys.setswitchinterval(_saved_switch)


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def shared_pool(size: int) -> WorkerPool | None:
    """The process's pool of ``size`` workers (``None`` for 0); a new size replaces it."""
    global _pool
    with _pool_lock:
        if size <= 0:
            return None
        if _pool is None or _pool.size != size:
            if _pool is not None:
                _pool.close()
            _pool = WorkerPool(size)
        return _pool


def default_size() -> int:
    """One worker per core beside the driving process's (0 on one core)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        cores = os.cpu_count() or 1
    return max(0, cores - 1)


@atexit.register
def _close_shared() -> None:
    if _pool is not None:
        _pool.close()


# ---------------------------------------------------------------- the worker's side


class _Counters:
    """Beam's metrics updates of one element (this is the worker thread's state tracker)."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}

    def update_metric(self, typed_metric_name: Any, value: Any) -> None:
        name = typed_metric_name.metric_name
        if "Counter" in getattr(typed_metric_name.cell_type, "__name__", ""):
            key = f"{name.namespace}.{name.name}"
            self.counters[key] = self.counters.get(key, 0) + int(value)


def _serve(inp: IO[bytes], out: IO[bytes]) -> None:
    import gc
    import traceback

    from apache_beam.internal import pickler
    from apache_beam.runners.worker import statesampler

    from pipelines.eager import _outputs

    gc.disable()  # (as the driving process does during a batch: pure steps make few cycles)
    fns: dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}
    served = 0
    while True:
        try:
            message = _receive(inp)
        except EOFError:
            return
        tracker = _Counters()
        reply: tuple[Any, ...]
        try:  # (elements that pickled there but do not load here: the driving process runs them)
            key, payload, elements, label = pickle.loads(message)
            if key not in fns:
                if payload is None:
                    raise RuntimeError("the driving process sent a step this worker does not hold")
                fn, args, kwargs = pickler.loads(payload)  # type: ignore[no-untyped-call]
                fn.setup()
                if len(fns) >= _FN_CACHE:
                    old = fns.pop(next(iter(fns)))
                    old[0].teardown()
                fns[key] = (fn, tuple(args), dict(kwargs))
        except Exception as exc:  # noqa: BLE001 - the driving process runs the bundle itself
            _write(out, ("unusable", f"{type(exc).__name__}: {exc}"))
            continue
        fn, args, kwargs = fns[key]
        try:
            statesampler.set_current_tracker(tracker)  # type: ignore[no-untyped-call]
            outputs = []
            for element in elements:
                got = fn.process(element, *args, **kwargs)
                outputs.append(list(_outputs(got, label)) if got is not None else [])
            reply = ("ok", outputs, tracker.counters)
        except Exception as exc:  # noqa: BLE001 - the driving process raises it
            text = traceback.format_exc()
            try:  # (one that does not load as it was dumped, e.g. its __init__ takes other arguments)
                pickle.loads(pickle.dumps(exc))
                reply = ("err", exc, text)
            except Exception:  # noqa: BLE001 - an exception that cannot cross: its text does
                reply = ("err", None, text)
        finally:
            statesampler.set_current_tracker(None)  # type: ignore[no-untyped-call]
        try:
            data = _dumps(reply)
        except Exception as exc:  # noqa: BLE001 - outputs that cannot cross: the driving process runs it
            data = _dumps(("unusable", f"its outputs do not pickle: {type(exc).__name__}: {exc}"))
        _send(out, data)
        served += len(elements)
        if served >= _COLLECT_EVERY:
            served = 0
            gc.collect()


def main() -> None:
    """A worker: read elements from stdin, write their outputs to stdout, until EOF."""
    inp = sys.stdin.buffer
    # The replies get a descriptor of their own and fd 1 becomes stderr: nothing a step or a
    # library prints (Python's print, a C library's write to fd 1) can corrupt them.
    # Ctrl-C at a terminal reaches the whole process group: the driving process decides what a
    # batch does on a signal (it finishes it), and ends its workers by closing their stdin
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout.flush()  # (what importing printed goes to stderr too)
    sys.stdout = sys.stderr
    import pipelines.beam_stages  # noqa: F401 - imported before the first element arrives

    _serve(inp, out)


if __name__ == "__main__":
    main()
