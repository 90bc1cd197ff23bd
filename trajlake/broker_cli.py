"""``trajlake up``, ``down``, ``status`` and ``topics``: the embedded broker or cluster and its topics."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from trajlake.terminal import ExitCode, console, fail, note, settings

if TYPE_CHECKING:
    pass


def embedded_broker(progress: bool = True) -> Any:
    """The embedded broker of the settings' home (progress lines on stderr)."""
    from ingest.kafka_broker import EmbeddedKafka

    s = settings()
    return EmbeddedKafka(
        s.home,
        s.kafka_bootstrap,
        topics=s.topics,
        heap=s.kafka_heap,
        progress=note if progress else None,
    )


def _kafka(*, brokers: int | None = None, progress: bool = True) -> Any:
    """The home's Kafka: its cluster (``--brokers N``, or one it has), else the single embedded broker."""
    from ingest.kafka_cluster import KafkaCluster, cluster_state

    s = settings()
    state = cluster_state(s.home)
    if (brokers is not None and brokers > 1) or state is not None:
        n = brokers if brokers is not None else len(state["nodes"]) if state else 3
        return KafkaCluster(s.home, s.kafka_bootstrap.split(",")[0], brokers=n, topics=s.topics,
                            progress=note if progress else None)  # fmt: skip
    return embedded_broker(progress)


def _brokers_table(status: Any) -> Table:
    table = Table(title=f"brokers (active controller: {status.controller or '-'})")
    for col in ("id", "port", "pid", "alive"):
        table.add_column(col)
    for b in status.brokers:
        table.add_row(str(b.id), str(b.port), str(b.pid or "-"),
                      "[green]yes[/green]" if b.alive else "[red]no[/red]")  # fmt: skip
    return table


def _status_table(status: Any) -> Table:
    table = Table(title=f"Kafka broker {status.bootstrap}", show_lines=False)
    table.add_column("topic")
    table.add_column("partitions", justify="right")
    table.add_column("end offsets", justify="left")
    table.add_column("events", justify="right")
    for topic, parts in status.topics.items():
        table.add_row(
            topic, str(len(parts)), " ".join(f"{p}:{o}" for p, o in parts.items()), str(sum(parts.values()))
        )
    return table


# ------------------------------------------------------------------ broker


def up(
    brokers: Annotated[
        int | None,
        typer.Option(min=1, help="Brokers of a loopback cluster (3: replication 3, min.insync.replicas 2)."),
    ] = None,
) -> None:
    """Start the embedded Kafka broker (KRaft) or a cluster of them, with the topics; harmless if up."""
    kafka = _kafka(brokers=brokers)
    status = kafka.start()
    if hasattr(status, "brokers"):
        console.print(f"[green]cluster up[/green]: {len(status.brokers)} brokers on {status.bootstrap}, "
                      f"data {status.data_dir}")  # fmt: skip
        console.print(_brokers_table(status))
    else:
        console.print(
            f"[green]broker up[/green] pid {status.pid} on {status.bootstrap}, data {status.data_dir}"
        )
    console.print(_status_table(status))


def down(
    kill: Annotated[bool, typer.Option(help="SIGKILL instead of a clean shutdown.")] = False,
    broker: Annotated[
        int | None, typer.Option(min=1, help="Only this broker of the cluster (its id in `trajlake status`).")
    ] = None,
) -> None:
    """Stop the embedded Kafka broker (or cluster, or one broker of it) cleanly; the data survives."""
    kafka = _kafka()
    if broker is not None:
        if not hasattr(kafka, "nodes") or broker not in kafka.nodes:
            fail(f"no broker {broker} here: `trajlake status` lists the brokers", ExitCode.USAGE)
        node = kafka.nodes[broker]
        stopped = node.kill() if kill else node.stop()
        console.print(f"broker {broker} {'stopped' if stopped else 'was not running'}")
        return
    stopped = kafka.kill() if kill else kafka.stop()
    console.print("broker stopped" if stopped else "broker was not running")


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the broker(s), the controller, under-replicated partitions and end offsets (exit 3 when down)."""
    from ingest.kafka_broker import parse_bootstrap

    st = _kafka(progress=False).status()
    if hasattr(st, "brokers"):
        brokers = [{"id": b.id, "port": b.port, "pid": b.pid, "alive": b.alive} for b in st.brokers]
        controller, under = st.controller, st.under_replicated
    else:
        port = parse_bootstrap(st.bootstrap)[1]
        brokers = [{"id": 1, "port": port, "pid": st.pid, "alive": st.running}]
        controller, under = (1 if st.running else None), []
    if as_json:
        print(
            json.dumps(
                {
                    "running": st.running,
                    "pid": st.pid,
                    "bootstrap": st.bootstrap,
                    "data_dir": st.data_dir,
                    "brokers": brokers,
                    "controller": controller,
                    "under_replicated": under,
                    "topics": {t: {str(p): o for p, o in ps.items()} for t, ps in st.topics.items()},
                }
            )
        )
    elif st.running:
        console.print(f"[green]Kafka running[/green] on {st.bootstrap}, data {st.data_dir}")
        if hasattr(st, "brokers"):
            console.print(_brokers_table(st))
            console.print("under-replicated partitions: " + (", ".join(under) or "none"))
        console.print(_status_table(st))
    else:
        console.print(
            f"[yellow]broker not running[/yellow] (bootstrap {st.bootstrap}, data {st.data_dir}); "
            "start it with `trajlake up`"
        )
    if not st.running:
        raise typer.Exit(code=ExitCode.NOT_READY)


def topics_ensure(
    replication: Annotated[int, typer.Option(min=1, help="Replicas of each partition (3 on a cluster).")] = 3,
) -> None:
    """Create the topics on a running cluster (TRAJLAKE_KAFKA_BOOTSTRAP) that do not exist yet."""
    from ingest.kafka_broker import EmbeddedKafka, Quorum, require_broker

    s = settings()
    require_broker(s.kafka_bootstrap)
    quorum = Quorum({i: 0 for i in range(1, replication + 1)}, "", replication=replication)
    EmbeddedKafka(s.home, s.kafka_bootstrap, topics=s.topics, quorum=quorum, progress=note).ensure_topics()
    console.print(f"topics on {s.kafka_bootstrap}: {', '.join(s.topics)} (replication {replication}, "
                  f"min.insync.replicas {quorum.min_insync})")  # fmt: skip
