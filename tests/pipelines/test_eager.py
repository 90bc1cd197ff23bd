"""The eager executor runs a Beam graph step by step in this process, with Beam's own results.

The pipeline's equality across executors on real data is in ``test_log_pipeline`` (a lake
folded eagerly in small batches equals its replay on the ``FnApiRunner``'s worker processes).
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics
from apache_beam.testing.util import assert_that, equal_to

from pipelines import PipelineConfig, PipelineError
from pipelines.beam_stages import Rows, gather, split_by_tag
from pipelines.eager import EagerPipeline
from pipelines.log_pipeline import eager_bound, runs_eagerly


class _Tagging(beam.DoFn):
    def __init__(self) -> None:
        self.seen = Metrics.counter("test", "seen")

    def process(self, x: int) -> Any:
        self.seen.inc()
        yield ("even" if x % 2 == 0 else "odd"), x


class _Squares(beam.PTransform):  # type: ignore[type-arg]
    def expand(self, pcoll: Any) -> Any:
        return pcoll | "Square" >> beam.Map(lambda x: x * x) | "Spread" >> beam.Reshuffle()


def graph(p: Any) -> Any:
    """A graph of every kind of step the pipeline's graph uses; returns its last collection."""
    nums = p | "Nums" >> beam.Create(range(10))
    tagged = split_by_tag(nums | "Tag" >> beam.ParDo(_Tagging()), ("even", "odd"), "Only")
    squares = tagged.even | "Squares" >> _Squares()
    both = (squares, tagged.odd | "Neg" >> beam.Map(lambda x: -x)) | "Both" >> beam.Flatten()
    keyed = {
        "a": both | "KeyA" >> beam.Map(lambda x: (abs(x) % 3, x)),
        "b": p | "B" >> beam.Create([(0, "zero"), (5, "five")]),
    }
    joined = keyed | "Join" >> beam.CoGroupByKey()
    out = joined | "Flat" >> beam.MapTuple(lambda k, g: (k, sorted(g["a"]), sorted(g["b"])))
    nonempty = out | "Keep" >> beam.Filter(lambda t: t[1] or t[2])
    return gather(nonempty | "Many" >> beam.FlatMap(lambda t, n: [t] * n, 2), "All") | "Sort" >> beam.Map(
        lambda xs: sorted(xs)
    )


EXPECTED = [
    sorted(
        [
            (0, [-9, -3, 0, 36], ["zero"]),
            (1, [-7, -1, 4, 16, 64], []),
            (2, [-5], []),
            (5, [], ["five"]),
        ]
        * 2
    )
]


def test_a_graph_of_every_step_kind_gives_what_beam_gives() -> None:
    p = EagerPipeline()
    got = graph(p)
    assert got.elements == EXPECTED
    assert p.counters == {"test.seen": 10}
    with beam.Pipeline(runner="DirectRunner") as bp:  # the same graph on a Beam runner
        assert_that(graph(bp), equal_to(EXPECTED))


def test_an_empty_input_gathers_to_nothing_as_on_a_runner() -> None:
    p = EagerPipeline()
    empty = p | "None" >> beam.Create([])
    assert gather(empty, "All").elements == []
    assert isinstance(gather(p | "One" >> beam.Create([1]), "One").elements[0], Rows)


def test_a_step_it_cannot_run_the_same_is_refused_by_name() -> None:
    p = EagerPipeline()
    nums = p | "Nums" >> beam.Create([1, 2])
    with pytest.raises(PipelineError, match="does not run WindowInto.*in_process_below=0"):
        _ = nums | "Win" >> beam.WindowInto(beam.window.FixedWindows(10))
    with pytest.raises(PipelineError, match="side inputs"):
        _ = nums | "Side" >> beam.Map(lambda x, s: x + s, beam.pvalue.AsSingleton(nums))


def test_which_batches_run_eagerly() -> None:
    cfg = PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", in_process_below=20_000)
    assert [runs_eagerly(cfg, n) for n in (5, 19_999, 20_000)] == [True, True, False]
    assert not runs_eagerly(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", executor="beam"), 5)
    assert runs_eagerly(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", executor="eager"), 10**7)
    assert not runs_eagerly(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", runner="dask"), 5)
    flink = PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", beam_args=["--runner=FlinkRunner"])
    assert not runs_eagerly(flink, 5)
    with pytest.raises(PipelineError, match="executor 'fast' is not one of"):
        runs_eagerly(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", executor="fast"), 5)
    # auto plans a backlog as batches below the bound; any other choice leaves batches whole
    assert eager_bound(cfg) == 19_999
    for other in ({"executor": "beam"}, {"executor": "eager"}, {"runner": "dask"}, {"in_process_below": 0}):
        assert eager_bound(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", **other)) is None  # type: ignore[arg-type]


def test_group_and_join_keep_beams_shapes() -> None:
    p = EagerPipeline()
    kv = p | "Kv" >> beam.Create([(1, "int"), (1.0, "float"), (True, "bool"), (1, "int2")])
    groups = sorted((type(k).__name__, sorted(v)) for k, v in (kv | "G" >> beam.GroupByKey()))
    assert groups == [("bool", ["bool"]), ("float", ["float"]), ("int", ["int", "int2"])]
    a = p | "A" >> beam.Create([("k", 1)])
    b = p | "B" >> beam.Create([("k", 2), ("j", 3)])
    joined = dict((a, b) | "J" >> beam.CoGroupByKey())  # a tuple of inputs: a tuple per key, as in Beam
    assert joined == {"k": ([1], [2]), "j": ([], [3])}


def test_outputs_a_runner_would_refuse_or_route_are_refused() -> None:
    p = EagerPipeline()
    nums = p | "Nums" >> beam.Create([1])
    with pytest.raises(PipelineError, match="returned a str"):
        _ = nums | "Str" >> beam.FlatMap(lambda x: "ab")
    with pytest.raises(PipelineError, match="TaggedOutput"):
        _ = nums | "Tag" >> beam.FlatMap(lambda x: [beam.pvalue.TaggedOutput("t", x)])
    with pytest.raises(PipelineError, match="does not pass t to"):
        _ = nums | "Ts" >> beam.Map(lambda x, t=beam.DoFn.TimestampParam: (x, t))


class _Held(beam.DoFn):
    torn_down = 0

    def process(self, x: int) -> Any:
        raise ValueError("boom")

    def teardown(self) -> None:
        type(self).torn_down += 1


def test_a_failing_step_is_torn_down_and_its_error_is_raised_as_is() -> None:
    p = EagerPipeline()
    with pytest.raises(ValueError, match="boom"):
        _ = p | "One" >> beam.Create([1]) | "Fail" >> beam.ParDo(_Held())
    assert _Held.torn_down == 1


def test_a_builtin_as_the_function_of_a_step_runs() -> None:
    p = EagerPipeline()
    got = p | "Xs" >> beam.Create([0, 1, "", "a"]) | "Truthy" >> beam.Filter(bool) | "Len" >> beam.Map(str)
    assert got.elements == ["1", "a"]


_COUNT = beam.transforms.userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())
_COUNT_PARAM = beam.DoFn.StateParam(_COUNT)


class _Stateful(beam.DoFn):
    def process(self, kv: Any, count: Any = _COUNT_PARAM) -> Any:
        yield kv


class _YieldsAndReturns(beam.DoFn):
    def process(self, x: int) -> Any:
        if x:
            return [x]
        yield x


def test_beams_construction_checks_give_the_same_answers_memoized() -> None:
    """``pipelines.eager`` keeps Beam's per-``ParDo`` checks by what they read: same answers."""
    from apache_beam.transforms import core, userstate
    from apache_beam.typehints.typecheck import TypeCheckWrapperDoFn

    memo_specs, memo_yield = userstate.get_dofn_specs, core._check_fn_use_yield_and_return
    assert getattr(memo_specs, "_trajlake", False) and getattr(memo_yield, "_trajlake", False)
    original_specs = memo_specs.__closure__[0].cell_contents  # type: ignore[attr-defined]
    original_yield = memo_yield.__closure__[0].cell_contents  # type: ignore[attr-defined]

    fns = [
        _Stateful(),
        _Stateful(),
        _Tagging(),
        _YieldsAndReturns(),
        _Held(),
        beam.Map(len).fn,
        beam.Map(lambda x, s=_COUNT_PARAM: x).fn,
        beam.Map(_Held().process).fn,  # (a bound method: read through _inspect_process, never kept)
        # Beam's type-check wrappers (runtime_type_check) read the wrapped DoFn through a hook on
        # their class: a stateless one first, then a stateful one, each its own answer
        TypeCheckWrapperDoFn(_Tagging(), _Tagging().get_type_hints()),
        TypeCheckWrapperDoFn(_Stateful(), _Stateful().get_type_hints()),
    ]
    for _ in range(2):  # the second time from what was kept
        for fn in fns:
            assert memo_specs(fn) == original_specs(fn)
            assert memo_yield(fn.process) == original_yield(fn.process)
    assert memo_specs(_Stateful())[0]  # a state spec found (and the eager executor refuses it)
    assert memo_yield(_YieldsAndReturns().process) and not memo_yield(_Tagging().process)
    with pytest.raises(PipelineError, match="does not pass count"):
        _ = EagerPipeline() | beam.Create([(1, 2)]) | beam.ParDo(_Stateful())
    # a class whose process is replaced (a test's monkeypatch) is inspected anew
    specs_before = memo_specs(_Tagging())
    original_process = _Tagging.process
    try:
        _Tagging.process = _Stateful.process  # type: ignore[method-assign,assignment]
        assert memo_specs(_Tagging())[0] and not specs_before[0]
    finally:
        _Tagging.process = original_process  # type: ignore[method-assign]
