"""The batch's Beam graph evaluated step by step in this process: no runner, no workers.

A micro-batch of a few thousand records costs the local ``FnApiRunner`` seconds
before it reads a record: the graph is translated to its protocol form, fused into
stages, and every stage runs as bundles through its data plane, whatever the batch
holds. :func:`run_eager` runs the same graph (:func:`pipelines.log_pipeline.build`,
its stages, their ``DoFn``s) with none of that: each transform is applied as the
graph is built, to plain lists, in the order the graph's code applies them (a step
runs after every step it reads from, as on any runner).

It knows the transforms the pipeline's graph is made of: ``Create``, ``ParDo``
(``Map``, ``FlatMap``, ``MapTuple``, ``Filter``), ``GroupByKey``, ``CoGroupByKey``,
``Flatten``, ``Reshuffle`` and composite transforms (expanded). Anything else is a
:class:`~pipelines.errors.PipelineError` naming it, never a silent difference: the
graph then runs on a Beam runner. Beam's metrics counters count as on a runner.
"""

from __future__ import annotations

import inspect
import logging
import types
from collections.abc import Callable, Iterable
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.internal import pickler
from apache_beam.runners.worker import statesampler
from apache_beam.transforms.core import _DoFnParam
from apache_beam.transforms.ptransform import _NamedPTransform
from apache_beam.transforms.userstate import StateSpec as _StateSpec
from apache_beam.transforms.userstate import TimerSpec as _TimerSpec
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.windowed_value import WindowedValue

from pipelines.eager_workers import WorkerPool
from pipelines.errors import PipelineError

log = logging.getLogger(__name__)


class EagerCollection(pvalue.PValue):
    """A step's output: its elements, already computed.

    A ``PValue`` to Beam's own code, so that ``(a, b) | beam.Flatten()`` and
    ``{"x": a} | beam.CoGroupByKey()`` come back to :meth:`EagerPipeline.apply`.
    """

    def __init__(self, pipeline: EagerPipeline, elements: list[Any], label: str) -> None:  # noqa: D107
        # (Beam's PValue.__init__ is not called: nothing of a deferred value applies here)
        self.pipeline = pipeline  # type: ignore[assignment]
        self.elements = elements
        self.label = label

    producer = None
    element_type = None

    @property
    def windowing(self) -> Any:
        """The global window (what a side input's constructor asks before the executor refuses it)."""
        from apache_beam.transforms.core import Windowing
        from apache_beam.transforms.window import GlobalWindows

        return Windowing(GlobalWindows())

    def __or__(self, transform: Any) -> Any:
        return self.pipeline.apply(transform, self)

    def __iter__(self) -> Any:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self.elements)


class _Begin:
    """What a root transform (``Create``) is applied to: ``pipeline | beam.Create(...)``."""

    def __init__(self, pipeline: EagerPipeline) -> None:
        self.pipeline = pipeline


def _elements(value: Any) -> list[Any]:
    if isinstance(value, EagerCollection):
        return value.elements
    raise PipelineError(f"the eager executor was given {type(value).__name__}, not a collection of its own")


class EagerPipeline:
    """A stand-in for ``beam.Pipeline`` whose transforms run as they are applied.

    Counters of Beam's ``Metrics`` incremented by its ``DoFn``s are kept in
    :attr:`counters` (``namespace.name`` -> count).
    """

    class _Runner:
        is_eager = False  # Beam's __ror__ then hands the inputs to apply(), as to a deferred pipeline

    runner = _Runner()

    def __init__(self, workers: WorkerPool | None = None) -> None:
        self.counters: dict[str, int] = {}
        self.workers = workers
        """Processes that run the elements of a ``DoFn`` marked ``eager_parallel`` beside this one
        (:mod:`pipelines.eager_workers`); ``None``: every step runs here."""

    def __or__(self, transform: Any) -> Any:
        return self.apply(transform, _Begin(self))

    def update_metric(self, typed_metric_name: Any, value: Any) -> None:
        """Beam's metrics updates land here (this pipeline is the thread's state tracker while it runs)."""
        name = typed_metric_name.metric_name
        if "Counter" in getattr(typed_metric_name.cell_type, "__name__", ""):
            key = f"{name.namespace}.{name.name}"
            self.counters[key] = self.counters.get(key, 0) + int(value)

    def apply(self, transform: Any, value: Any, label: str | None = None) -> Any:
        """``value | transform``: the transform's output, computed now."""
        if isinstance(transform, _NamedPTransform):
            return self.apply(transform.transform, value, transform.label)
        label = str(label or getattr(transform, "label", None) or type(transform).__name__)
        if isinstance(transform, beam.Create):
            return self._out(list(transform.values), label)
        if isinstance(transform, beam.ParDo) and not isinstance(transform, beam.WindowInto):
            return self._out(self._pardo(transform, _elements(value)), label)
        if isinstance(transform, beam.GroupByKey):
            # keyed by type too: Beam groups by the encoded key, so 1, 1.0 and True stay apart
            grouped: dict[Any, tuple[Any, list[Any]]] = {}
            for k, v in _elements(value):
                grouped.setdefault((type(k), k), (k, []))[1].append(v)
            return self._out(list(grouped.values()), label)
        if isinstance(transform, beam.CoGroupByKey):
            return self._out(self._cogroup(value), label)
        if isinstance(transform, beam.Flatten):
            parts = value.values() if isinstance(value, dict) else value
            return self._out([x for part in parts for x in _elements(part)], label)
        if isinstance(transform, beam.Reshuffle):  # a runner's hint to spread the work: nothing here
            return self._out(list(_elements(value)), label)
        if type(transform).expand is not beam.PTransform.expand and not _primitive(transform):
            out = transform.expand(value)  # a composite: its parts are applied here, one by one
            if isinstance(out, EagerCollection | dict | tuple) or out is None:
                return out
        raise PipelineError(
            f"the eager executor does not run {type(transform).__name__} ({label!r}); run this graph "
            "on a Beam runner (PipelineConfig(in_process_below=0))"
        )

    def _out(self, elements: list[Any], label: str) -> EagerCollection:
        return EagerCollection(self, elements, label)

    def _pardo(self, pardo: Any, elements: Iterable[Any]) -> list[Any]:
        if pardo.side_inputs:
            raise PipelineError(f"the eager executor does not pass side inputs ({pardo.label!r})")
        fn = pardo.fn
        process: Callable[..., Any] = fn.process
        # (a Map/FlatMap's DoFn wraps the user's function: its parameters are the ones that count)
        argspec_fn = getattr(fn, "_process_argspec_fn", None)
        declared = argspec_fn() if callable(argspec_fn) else process
        try:
            signature = inspect.signature(declared).parameters.items()
        except (TypeError, ValueError):  # a builtin (beam.Filter(bool)): no parameters of a runner's
            signature = inspect.signature(lambda element: None).parameters.items()
        params = [
            name
            for name, param in signature
            if isinstance(param.default, _DoFnParam) or isinstance(param.default, _StateSpec | _TimerSpec)
        ]
        if params:  # windows, timestamps, state and timers: a runner's, not a list's
            raise PipelineError(
                f"the eager executor does not pass {', '.join(params)} to {type(fn).__name__} "
                f"({pardo.label!r}); run this graph on a Beam runner (PipelineConfig(in_process_below=0))"
            )
        out: list[Any] = []
        elements = elements if isinstance(elements, list) else list(elements)
        payload = self._spread(fn, pardo, elements)  # (pickled before its setup makes clients)
        with _tracking(self):
            fn.setup()
            try:
                fn.start_bundle()

                def local(element: Any) -> list[Any]:
                    got = process(element, *pardo.args, **pardo.kwargs)
                    return list(_outputs(got, pardo.label)) if got is not None else []

                if payload is not None:
                    assert self.workers is not None
                    parts, counters = self.workers.map(payload, elements, pardo.label, local)
                    for name, n in counters.items():
                        self.counters[name] = self.counters.get(name, 0) + n
                else:
                    parts = [local(element) for element in elements]
                for part in parts:
                    out.extend(part)
                finished = fn.finish_bundle()  # (Beam's contract: WindowedValues)
                if finished is not None:
                    out.extend(getattr(w, "value", w) for w in finished)
            finally:
                fn.teardown()
        return out

    def _spread(self, fn: Any, pardo: Any, elements: list[Any]) -> bytes | None:
        """The step pickled for the worker processes, if ``fn``'s elements go to them too.

        Only a ``DoFn`` that says it is a pure function of its element (``eager_parallel``) and
        keeps nothing between elements (no ``start_bundle``/``finish_bundle`` of its own), only
        when there are two elements or more to share, and only one that pickles (else ``None``:
        this process runs them all).
        """
        if self.workers is None or len(elements) < 2 or not getattr(fn, "eager_parallel", False):
            return None
        cls = type(fn)
        if cls.start_bundle is not beam.DoFn.start_bundle or cls.finish_bundle is not beam.DoFn.finish_bundle:
            return None
        try:
            return pickler.dumps((fn, pardo.args, pardo.kwargs))  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001 - a step that cannot cross runs here
            log.warning("step %r does not pickle (%r); its elements run in this process", pardo.label, exc)
            return None

    def _cogroup(self, value: Any) -> list[Any]:
        named = isinstance(value, dict)
        tagged = list(value.items() if named else enumerate(value))
        tags = [t for t, _ in tagged]
        groups: dict[Any, tuple[Any, dict[Any, list[Any]]]] = {}
        for tag, pcoll in tagged:
            for k, v in _elements(pcoll):
                groups.setdefault((type(k), k), (k, {t: [] for t in tags}))[1][tag].append(v)
        # Beam's result: a dict by tag for a dict of inputs, a tuple in input order for a tuple
        return [(k, got if named else tuple(got[t] for t in tags)) for k, got in groups.values()]


def _outputs(got: Any, label: str) -> Any:
    """What a ``process`` call returned, as the elements it outputs (as a runner reads them)."""
    if isinstance(got, str | bytes | dict):  # Beam refuses these too: iterating one is never meant
        raise PipelineError(
            f"step {label!r} returned a {type(got).__name__} from process(); "
            "return or yield a list of outputs"
        )
    for x in got:
        if isinstance(x, pvalue.TaggedOutput | TimestampedValue | WindowedValue):
            raise PipelineError(
                f"the eager executor does not route {type(x).__name__} outputs ({label!r}); run this "
                "graph on a Beam runner (PipelineConfig(in_process_below=0))"
            )
        yield x


def _primitive(transform: Any) -> bool:
    return isinstance(transform, beam.Impulse | beam.ParDo | beam.GroupByKey | beam.Flatten)


# ---------------------------------------------------------------- Beam's checks, memoized

# Constructing a ``ParDo`` costs Beam 1-1.6 ms, most of it checks that give the same answer for the
# same code: the source of ``process`` read back to look for ``yield`` beside ``return`` (0.25 ms)
# and every method's signature inspected for state and timer parameters, twice (0.7 ms). The
# graph a batch builds has about a hundred ``ParDo``s, so a batch of 2,000 events spent 0.15 s of
# its 0.48 s there. Both answers are kept here by what they are computed from.

_yield_checks: dict[Any, bool] = {}
_dofn_specs: dict[Any, tuple[frozenset[Any], frozenset[Any]]] = {}
_SPECS_KEPT = 4096


def _memoized_yield_check(original: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def check(fn: Any) -> bool:
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        if code is None:
            return original(fn)
        if code not in _yield_checks:  # (the answer is a function of the source, i.e. of the code)
            if len(_yield_checks) >= _SPECS_KEPT:
                _yield_checks.clear()
            _yield_checks[code] = original(fn)
        return _yield_checks[code]

    return check


def _specs_key(dofn: Any) -> Any:
    """What Beam's state-and-timer inspection of ``dofn`` reads: its class and its methods' functions.

    ``None`` when it reads something else too (an ``_inspect_process`` hook over a bound method).
    """
    own = getattr(dofn, "__dict__", {})
    methods = []
    for name in dir(dofn):
        m = getattr(dofn, name, None)
        if isinstance(m, types.MethodType):
            # a hook (Beam's type-check wrappers have them on the class) reads the wrapped DoFn;
            # a method held by the instance is one of its own (a handler's per-instance binding)
            if hasattr(dofn, f"_inspect_{name}") or name in own:
                return None
            methods.append((name, m.__func__))
    return type(dofn), tuple(methods)


def _memoized_specs(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def specs(dofn: Any) -> tuple[set[Any], set[Any]]:
        key = _specs_key(dofn)
        if key is None:
            return original(dofn)  # type: ignore[no-any-return]
        if key not in _dofn_specs:
            if len(_dofn_specs) >= _SPECS_KEPT:  # (classes made at run time: bounded, not kept forever)
                _dofn_specs.clear()
            state, timers = original(dofn)
            _dofn_specs[key] = (frozenset(state), frozenset(timers))
        state, timers = _dofn_specs[key]
        return set(state), set(timers)  # (fresh sets: a caller may change its own)

    return specs


def _install_memoized_checks() -> None:
    from apache_beam.transforms import core, userstate

    check = getattr(core, "_check_fn_use_yield_and_return", None)
    if check is not None and not getattr(check, "_trajlake", False):
        core._check_fn_use_yield_and_return = _memoized_yield_check(check)
        core._check_fn_use_yield_and_return._trajlake = True  # type: ignore[attr-defined]
    specs = getattr(userstate, "get_dofn_specs", None)
    if specs is not None and not getattr(specs, "_trajlake", False):
        userstate.get_dofn_specs = _memoized_specs(specs)
        userstate.get_dofn_specs._trajlake = True  # type: ignore[attr-defined]


_install_memoized_checks()


class _tracking:  # noqa: N801 - a context manager
    """Beam's metrics updates in this thread go to ``pipeline`` inside the block (as a bundle's do)."""

    def __init__(self, pipeline: EagerPipeline) -> None:
        self.pipeline = pipeline

    def __enter__(self) -> None:
        self.saved = statesampler.get_current_tracker()  # type: ignore[no-untyped-call]
        statesampler.set_current_tracker(self.pipeline)  # type: ignore[no-untyped-call]

    def __exit__(self, *exc: object) -> None:
        statesampler.set_current_tracker(self.saved)  # type: ignore[no-untyped-call]
