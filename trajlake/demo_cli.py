"""``trajlake demo``: the closed loop end to end, as a measurement."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from trajlake.broker_cli import embedded_broker
from trajlake.terminal import ExitCode, console, settings

if TYPE_CHECKING:
    pass


def demo(
    iterations: Annotated[
        int, typer.Option(min=1, help="RL iterations (rollouts -> pipeline -> learner).")
    ] = 4,
    group_size: Annotated[int, typer.Option(min=2, help="Attempts per training task and iteration (G).")] = 8,
    workers: Annotated[int, typer.Option(min=1, help="Rollout worker processes.")] = 2,
    held_out: Annotated[int, typer.Option(min=1, help="Held-out tasks evaluated each iteration.")] = 200,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the tasks, the warm start and the samplers.")] = 0,
) -> None:
    """The closed loop end to end on the embedded default, as a measurement.

    Brings up the broker, builds the base image if this machine has none,
    generates and admits the reverse task family, warm-starts the in-repo
    transformer on mostly shorter synthetic strings, then iterates: rollouts in
    sandboxes (events to Kafka) -> Beam -> Delta -> policy-gradient learner ->
    new checkpoint, evaluating every held-out task greedily and sampled each
    time. Writes demo_summary.json (95% intervals) and a learning-curve PNG, and
    exits 0 only when the interval of the greedy final-minus-first difference
    lies above 0.
    """
    from trajlake.demo import run_demo

    ok = run_demo(
        settings(),
        embedded_broker(),
        iterations=iterations,
        group_size=group_size,
        workers=workers,
        held_out=held_out,
        seed=seed,
        console=console,
    )
    if not ok:
        raise typer.Exit(code=ExitCode.FAILED)


# ------------------------------------------------------------------ entry point
