"""One KRaft node in the foreground, configured from its arguments: a broker of a deployed cluster.

``trajlake up --brokers 3`` runs a cluster on one host's loopback; a deployment runs each node
on its own host or container (``docker-compose.yml``)::

    python -m ingest.kafka_node --id 1 --voters 1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093
        --advertise kafka-1:9092 --data /data --cluster-id <the cluster's id>

It formats the storage on first start (with the cluster id every node shares), then execs
the same Apache Kafka 4.x JVM the embedded broker runs (jars resolved by Maven, or the cached
classpath an image carries), combined broker and controller, replication 3 and
``min.insync.replicas`` 2 for a three-voter quorum. The process is the broker: a container
supervisor restarts it, and ``SIGTERM`` stops it cleanly.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from ingest.kafka_broker import EmbeddedKafka
from ingest.kafka_sink import MAX_MESSAGE_BYTES


def server_properties(
    node_id: int, voters: str, advertise: str, data: Path, *, listen: str = "0.0.0.0"
) -> str:
    """The node's ``server.properties``."""
    n = len([v for v in voters.split(",") if v])
    rf = min(3, n)
    isr = rf // 2 + 1 if rf >= 3 else 1
    mine = next(v for v in voters.split(",") if v.split("@")[0] == str(node_id))
    ctrl_port = mine.rsplit(":", 1)[1]
    client_port = advertise.rsplit(":", 1)[1]
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{listen}:{client_port},CONTROLLER://{listen}:{ctrl_port}",
        "advertised.listeners": f"PLAINTEXT://{advertise}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "8",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(isr),
        "unclean.leader.election.enable": "false",
        "auto.create.topics.enable": "false",
        "log.retention.ms": "-1",
        "log.retention.bytes": "-1",
        "message.max.bytes": str(MAX_MESSAGE_BYTES),
        "replica.fetch.max.bytes": str(MAX_MESSAGE_BYTES),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def main(argv: list[str] | None = None) -> None:
    """Format the storage once, then become the broker."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", type=int, required=True, help="this node's id")
    ap.add_argument("--voters", required=True, help="id@host:controller_port,... of every node")
    ap.add_argument("--advertise", required=True, help="host:port clients reach this broker at")
    ap.add_argument("--data", type=Path, required=True, help="the log directory")
    ap.add_argument("--cluster-id", required=True, help="the id every node of the cluster shares")
    ap.add_argument("--heap", default="512m")
    args = ap.parse_args(argv)
    args.data.mkdir(parents=True, exist_ok=True)
    config = args.data.parent / f"node-{args.id}.properties"
    config.write_text(server_properties(args.id, args.voters, args.advertise, args.data))
    node = EmbeddedKafka(args.data.parent, directory=args.data.parent)  # for Java and the classpath
    java = node.check_java()
    jvm = [java, f"-Xmx{args.heap}", f"-Xms{args.heap}", "-XX:+UseG1GC", "-cp", node.classpath()]
    if not (args.data / "meta.properties").exists():
        subprocess.run([*jvm, "kafka.tools.StorageTool", "format", f"--cluster-id={args.cluster_id}",
                        f"--config={config}", "--ignore-formatted"], check=True)  # fmt: skip
    sys.stdout.flush()
    os.execv(java, [*jvm, "kafka.Kafka", str(config)])


if __name__ == "__main__":
    main()
