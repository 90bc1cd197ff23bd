"""A Kafka cluster on loopback: N KRaft nodes, each broker and controller (combined mode).

``trajlake up --brokers 3``: three JVMs of the same Apache Kafka 4.x the embedded broker
runs, under ``<home>/kafka-cluster/node-<id>``, one quorum of three voters, topics with
replication factor 3 and ``min.insync.replicas`` 2. The recorder's producer writes with
``acks=all`` and idempotence, so an acknowledged event is on two brokers at least and one
broker may die (or be killed) without losing it. The cluster's layout (cluster id, every
node's client and controller port) is ``cluster.json``; it survives ``down``/``up``, and
while it is there the home's clients bootstrap from every broker
(:func:`cluster_bootstrap`), not one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.errors import BrokerError
from ingest.kafka_broker import (
    DEFAULT_TOPICS,
    EmbeddedKafka,
    Quorum,
    _free_port,
    new_cluster_id,
    parse_bootstrap,
    port_in_use,
    topic_end_offsets,
)
from schemas import fixes

CLUSTER_DIR = "kafka-cluster"
STATE_FILE = "cluster.json"


@dataclass(frozen=True)
class BrokerInfo:
    """One broker of the cluster, as ``trajlake status --json`` lists it."""

    id: int
    port: int
    pid: int | None
    alive: bool


@dataclass
class ClusterStatus:
    """What ``trajlake status`` shows of a cluster."""

    running: bool
    """Whether a quorum of brokers answers."""
    bootstrap: str
    brokers: list[BrokerInfo]
    controller: int | None
    """The id of the active controller (``None``: none is known)."""
    under_replicated: list[str] = field(default_factory=list)
    """``topic/partition`` whose in-sync replicas are fewer than its replicas."""
    topics: dict[str, dict[int, int]] = field(default_factory=dict)
    data_dir: str = ""

    @property
    def pid(self) -> int | None:
        """The first live broker's pid (what a single broker's status shows)."""
        return next((b.pid for b in self.brokers if b.alive), None)


def cluster_state(home: Path) -> dict[str, Any] | None:
    """The recorded layout of the home's cluster, or ``None`` when it has none."""
    path = Path(home) / CLUSTER_DIR / STATE_FILE
    try:
        state: dict[str, Any] = json.loads(path.read_text())
        host, nodes, _ = state["host"], state["nodes"], state["cluster_id"]
        if (
            not isinstance(host, str)
            or not nodes
            or not all(
                isinstance(int(n), int)
                and isinstance(v["port"], int)
                and isinstance(v["controller_port"], int)
                for n, v in nodes.items()
            )
        ):
            raise ValueError("unexpected layout")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BrokerError(f"cluster layout {path} is unreadable ({exc}); move {path.parent} away") from exc
    return state


def cluster_bootstrap(home: Path) -> str | None:
    """Every broker of the home's cluster as a bootstrap list (``None``: the home has no cluster)."""
    state = cluster_state(home)
    if state is None:
        return None
    return ",".join(
        f"{state['host']}:{n['port']}" for _, n in sorted(state["nodes"].items(), key=lambda kv: int(kv[0]))
    )


class KafkaCluster:
    """Start, stop, kill and inspect the home's N-broker cluster.

    Args:
        home: the trajlake home (the cluster lives in ``home/kafka-cluster``).
        bootstrap: ``host:port`` of the first broker (the others take free ports, recorded).
        brokers: how many nodes (3: replication factor 3, ``min.insync.replicas`` 2).
        topics: topics to create, with partition counts.
        heap: JVM heap of each node.
        progress: receives human-readable progress lines.
    """

    def __init__(
        self,
        home: Path,
        bootstrap: str = "127.0.0.1:9092",
        *,
        brokers: int = 3,
        topics: Mapping[str, int] | None = None,
        heap: str = "384m",
        start_timeout_s: float = 180.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.home = Path(home).absolute()
        self.dir = self.home / CLUSTER_DIR
        self.topics = dict(DEFAULT_TOPICS if topics is None else topics)
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self._progress = progress or (lambda _m: None)
        host, port = parse_bootstrap(bootstrap)
        state = cluster_state(self.home)
        single = self.home / "kafka" / "data"
        if state is None and single.is_dir() and any(single.iterdir()):
            # the home's log is the single broker's: a new cluster would start an empty log beside it,
            # and the lake (which holds that log's offsets) would skip what the cluster records
            raise BrokerError(
                f"this home's log is on its single broker ({single}); a cluster would start an empty "
                "one beside it (or move the single broker's data away)",
                fix=fixes.SEPARATE_HOME,
            )
        if state is not None and len(state["nodes"]) != brokers:
            raise BrokerError(
                f"{self.dir} holds a cluster of {len(state['nodes'])} brokers, not {brokers}",
                fix=fixes.cluster_up(len(state["nodes"])),
            )
        if state is None:
            if brokers < 1:
                raise BrokerError(f"a cluster needs at least one broker, not {brokers}")
            nodes: dict[str, dict[str, int]] = {}
            taken = {port}
            for n in range(1, brokers + 1):
                client = port if n == 1 else _free_port_not(host, taken)
                taken.add(client)
                ctrl = _free_port_not(host, taken)
                taken.add(ctrl)
                nodes[str(n)] = {"port": client, "controller_port": ctrl}
            state = {"host": host, "cluster_id": new_cluster_id(), "nodes": nodes}
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / STATE_FILE).write_text(json.dumps(state, indent=2))
        self.state = state
        self.host = str(state["host"])
        self.quorum = Quorum(
            voters={int(n): int(v["controller_port"]) for n, v in state["nodes"].items()},
            cluster_id=str(state["cluster_id"]),
            replication=min(3, len(state["nodes"])),
        )
        self.nodes = {
            int(n): EmbeddedKafka(
                self.home, f"{self.host}:{v['port']}", topics=self.topics, heap=heap,
                start_timeout_s=start_timeout_s, progress=progress, node_id=int(n), quorum=self.quorum,
                directory=self.dir / f"node-{n}",
            )
            for n, v in sorted(state["nodes"].items(), key=lambda kv: int(kv[0]))
        }  # fmt: skip
        self.bootstrap = ",".join(node.bootstrap for node in self.nodes.values())

    # ------------------------------------------------------------- lifecycle

    def start(self, nodes: list[int] | None = None) -> ClusterStatus:
        """Start the brokers that are not running (``nodes``: only those), wait for them, create topics.

        Raises:
            BrokerError: a node did not come up (its log tail is included).
        """
        wanted = [self.nodes[n] for n in (nodes or sorted(self.nodes))]
        launched = [(node, node.launch()) for node in wanted]
        for node, proc in launched:
            if proc is not None:
                node.wait_ready(proc)
        self._admin_node().ensure_topics()
        self.wait_in_sync()
        return self.status()

    def stop(self) -> bool:
        """Stop every broker cleanly; True if one was running."""
        return any([node.stop() for node in self.nodes.values()])

    def kill(self, node: int | None = None) -> bool:
        """SIGKILL one broker (``node``) or all of them; True if one was running."""
        targets = [self.nodes[node]] if node is not None else list(self.nodes.values())
        return any([n.kill() for n in targets])

    def wait_in_sync(self, timeout_s: float = 120.0) -> None:
        """Wait until no partition is under-replicated (after a broker came back).

        Raises:
            BrokerError: some partition is still under-replicated after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        lagging: list[str] = []
        while time.monotonic() < deadline:
            lagging = self._under_replicated()
            if not lagging:
                return
            time.sleep(0.5)
        raise BrokerError(
            f"partitions still under-replicated after {timeout_s:.0f}s: {', '.join(lagging[:5])}"
        )

    # ------------------------------------------------------------- status

    def _admin_node(self) -> EmbeddedKafka:
        """A node object whose bootstrap is the whole cluster (for admin calls)."""
        any_node = next(iter(self.nodes.values()))
        node = EmbeddedKafka(self.home, self.bootstrap, topics=self.topics, quorum=self.quorum,
                             directory=any_node.dir)  # fmt: skip
        return node

    def _describe(self) -> tuple[int | None, list[dict[str, Any]]]:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        live = ",".join(n.bootstrap for n in self.nodes.values() if n.pid() is not None)
        if not live:
            return None, []
        try:
            admin = KafkaAdminClient(bootstrap_servers=live, request_timeout_ms=10000)
        except (KafkaError, OSError):
            return None, []
        try:
            topics = list(admin.describe_topics(list(self.topics)))
        except (KafkaError, OSError):
            admin.close()
            return None, []
        try:
            # the metadata log's leader is the active controller (Metadata's controller id is a
            # random broker under KRaft, clients never talk to controllers)
            quorum = admin.describe_metadata_quorum()
            leader = quorum["topics"][0]["partitions"][0]["leader_id"]
            controller = int(leader) if isinstance(leader, int) and leader >= 0 else None
        except (KafkaError, OSError, KeyError, IndexError, TypeError):
            controller = None
        finally:
            admin.close()
        return controller, topics

    def _under_replicated(self) -> list[str]:
        _, topics = self._describe()
        if not topics:
            return [f"{t}/?" for t in self.topics]
        return _lagging(topics)

    def status(self) -> ClusterStatus:
        """Every broker's liveness, the controller, under-replicated partitions, end offsets."""
        brokers = []
        for n, node in self.nodes.items():
            pid = node.pid()
            brokers.append(
                BrokerInfo(n, node.port, pid, pid is not None and port_in_use(node.host, node.port))
            )
        alive = [b for b in brokers if b.alive]
        running = len(alive) > len(brokers) // 2
        controller, topics = self._describe() if alive else (None, [])
        under = _lagging(topics)
        offsets = topic_end_offsets(",".join(f"{self.host}:{b.port}" for b in alive)) if alive else {}
        return ClusterStatus(running, self.bootstrap, brokers, controller, under, offsets, str(self.dir))


def _lagging(topics: list[dict[str, Any]]) -> list[str]:
    """``topic/partition`` of the partitions with fewer in-sync replicas than replicas (or no leader)."""
    return [
        f"{t['name']}/{p['partition_index']}"
        for t in topics
        for p in t.get("partitions", [])
        if len(p.get("isr_nodes", [])) < len(p.get("replica_nodes", [])) or p.get("leader_id", -1) < 0
    ]


def _free_port_not(host: str, taken: set[int]) -> int:
    while True:
        port = _free_port(host)
        if port not in taken:
            return port
