"""Beam's ``DaskRunner`` with a graph whose width stays bounded.

Beam's ``DaskRunner`` turns each transform into a ``dask.bag`` operation. Two of its
translations make the task graph grow with the pipeline's depth, not its data:
``Flatten`` concatenates bags, so its partition count is the sum of its inputs', and
``GroupByKey`` keeps its input's partition count. Every ``CoGroupByKey`` is a
``Flatten`` then a ``GroupByKey``, and the log pipeline chains a dozen of them (each
table's commit waits for the one before), so a batch of 200 events became a graph of
169,024 tasks (22 MiB) that took minutes to schedule.

:class:`BoundedDaskRunner` is the same runner with three changes. A ``GroupByKey``
first joins its input into ``width`` partitions (the cluster's worker threads), so no stage
after a shuffle is wider than the cluster; it groups by the key and its type, as Beam does
by the key's encoding (``1`` and ``1.0`` are two keys). A ``ParDo`` makes each bundle's output
list in the bundle (Beam's shares one between the bundles a process runs, and keeps what
``finish_bundle`` emits out of it). Every other transform is translated by Beam's own
classes, so the graph computes the same values; only how they are partitioned differs.
"""

from __future__ import annotations

import collections
from typing import Any

from apache_beam import ParDo, pvalue
from apache_beam.pipeline import PipelineVisitor
from apache_beam.runners.dask import transform_evaluator as te
from apache_beam.runners.dask.dask_runner import DaskOptions, DaskRunner, DaskRunnerResult
from apache_beam.runners.dask.overrides import _GroupByKeyOnly, dask_overrides

WIDTH_KEY = "trajlake_group_partitions"
"""The ``bag_kwargs`` entry that carries the shuffle width to :class:`_BoundedGroupByKey`."""


class _BoundedGroupByKey(te.DaskBagOp):
    """``GroupByKey`` into at most the cluster's width of partitions."""

    def apply(self, input_bag: Any, side_inputs: Any = None) -> Any:
        width = max(1, min(int(self.bag_kwargs[WIDTH_KEY]), input_bag.npartitions))
        # ``groupby``'s task shuffle keeps its input's partitions (``npartitions`` is for the
        # disk shuffle only): concatenating partitions first is what narrows it
        return input_bag.repartition(npartitions=width).groupby(_key).map(_grouped)


class _ParDo(te.DaskBagOp):
    """Beam's ``ParDo`` translation, with the bundle's output list made in the bundle.

    Beam's builds one receiver (a list) when it translates the step and ships it with every
    partition; where a process runs two partitions of a step on the same copy (dask's
    synchronous and threaded schedulers), each returns the outputs of the ones before too.
    """

    def apply(self, input_bag: Any, side_inputs: Any = None) -> Any:
        transform = self.transform
        args, kwargs = transform.raw_side_inputs
        main = next(iter(self.applied.main_inputs.values()))
        window_fn = main.windowing.windowfn if hasattr(main, "windowing") else None
        return input_bag.map(te.get_windowed_value, window_fn).map_partitions(
            _run_bundle, transform.fn, transform.label, list(args), kwargs, window_fn, side_inputs
        )


def _run_bundle(
    items: Any, fn: Any, label: str, args: list[Any], kwargs: dict[str, Any], window_fn: Any, side_inputs: Any
) -> list[Any]:
    from apache_beam import DoFn
    from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, _OutputHandler

    receivers = te.OneReceiver()
    handler = _OutputHandler(
        window_fn=window_fn,
        main_receivers=receivers[None],
        tagged_receivers=receivers,
        per_element_output_counter=None,
        output_batch_converter=None,
        process_yields_batches=False,
        process_batch_yields_elements=False,
    )
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(fn),
        handler,
        context=DoFnContext(label, state=None),
        side_inputs=side_inputs,
        input_args=args,
        input_kwargs=kwargs,
        user_state_context=None,
        bundle_finalizer_param=DoFn.BundleFinalizerParam(),
    )
    invoker.invoke_setup()
    invoker.invoke_start_bundle()
    for item in items:
        invoker.invoke_process(item)
    invoker.invoke_finish_bundle()
    invoker.invoke_teardown()
    return [v.value for v in receivers.values]


def _key(item: Any) -> Any:
    # Beam groups by the key's encoding, so 1, 1.0 and True are three keys; a Python dict
    # (what dask.bag groups in) holds them as one: the key's type keeps them apart
    key = item[0]
    return type(key).__module__, type(key).__qualname__, key


def _grouped(item: Any) -> Any:
    (_, _, key), values = item
    return key, [te.defenestrate(v[1]) for v in values]


class _Visitor(PipelineVisitor):  # type: ignore[misc]
    """Each applied transform -> its ``dask.bag`` (in topological order)."""

    def __init__(self, bag_kwargs: dict[str, Any]) -> None:
        self.bag_kwargs = bag_kwargs
        self.bags: dict[Any, Any] = collections.OrderedDict()
        self.translations = {**te.TRANSLATIONS, _GroupByKeyOnly: _BoundedGroupByKey, ParDo: _ParDo}

    def visit_transform(self, node: Any) -> None:
        op = self.translations.get(node.transform.__class__, te.NoOp)(node, bag_kwargs=self.bag_kwargs)
        kwargs: dict[str, Any] = {"input_bag": None, "side_inputs": None}
        # a root's input (``PBegin``) is ``None``: Beam's ``Create`` expects none
        inputs = [
            None if isinstance(i, pvalue.PBegin) else self.bags[i.producer]
            for i in node.inputs
            if isinstance(i, pvalue.PBegin) or i.producer in self.bags
        ]
        if list(node.inputs):
            kwargs["input_bag"] = inputs[0] if len(inputs) == 1 and not isinstance(op, te.Flatten) else inputs
        if node.side_inputs:
            kwargs["side_inputs"] = [
                te.SideInputMap(
                    type(si),
                    si._view_options(),
                    te.DaskBagWindowedIterator(self.bags.get(si.pvalue.producer), si._window_mapping_fn),
                )
                for si in node.side_inputs
            ]
        self.bags[node] = op.apply(**kwargs)


class BoundedDaskRunner(DaskRunner):  # type: ignore[misc]
    """Beam's ``DaskRunner``; a ``GroupByKey`` narrows its input to the cluster's width first."""

    def run_pipeline(self, pipeline: Any, options: Any) -> DaskRunnerResult:
        """Translate ``pipeline`` to one ``dask.bag`` graph and submit it to the scheduler."""
        import dask
        import distributed

        dask_options = options.view_as(DaskOptions).get_all_options(drop_default=True, current_only=True)
        bag_kwargs = DaskOptions._extract_bag_kwargs(dask_options)
        client = distributed.Client(**dask_options)
        bag_kwargs[WIDTH_KEY] = max(2, sum(client.nthreads().values()))
        pipeline.replace_all(dask_overrides())
        visitor = _Visitor(bag_kwargs)
        pipeline.visit(visitor)
        # the last bag depends on every other one (the pipeline ends in one step all feed)
        graph = dask.optimize(list(visitor.bags.values())[-1])
        return DaskRunnerResult(client, client.compute(graph))
