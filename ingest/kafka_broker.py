"""The embedded default broker: a single-node Apache Kafka 4.x in KRaft mode.

The broker's jars are resolved from Maven Central by Maven from the pom in
``infra/kafka/pom.xml`` (Maven caches them in ``~/.m2``; the resolved classpath is
cached per pom digest). Storage is formatted once under ``<home>/kafka/data`` and
survives ``stop``/``start``. The broker runs as a detached JVM process whose pid
is kept in ``<home>/kafka/broker.pid``, so ``trajlake up``/``down`` work across
invocations, and two homes with two ports run two independent brokers.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.errors import BrokerError, BrokerUnavailableError, SinkUnavailableError
from ingest.kafka_sink import MAX_MESSAGE_BYTES
from schemas import fixes

log = logging.getLogger(__name__)

DEFAULT_TOPICS: dict[str, int] = {
    "trajlake.episodes": 8,
    "trajlake.judgements": 8,
    "trajlake.learner": 1,
    "trajlake.tasks": 1,
    "trajlake.curation": 1,
}
MIN_JAVA = 17


def _pom_path() -> Path:
    from infra.maven import pom_path

    return pom_path("kafka")


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """``host:port`` of the first bootstrap server.

    Raises:
        BrokerError: not of the form ``host:port``.
    """
    first = bootstrap.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise BrokerError(f"bootstrap servers must be host:port, got {bootstrap!r}")
    return host, int(port)


def port_in_use(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def require_topic(bootstrap: str, topic: str) -> None:
    """Fail, with the fix, when ``topic`` does not exist (the brokers create none on first use).

    A home whose broker was started before a release that added a topic lacks it until the
    topics are created again.

    Raises:
        SinkUnavailableError: Kafka cannot be reached, or the topic does not exist.
    """
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    require_broker(bootstrap)
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        try:
            known = consumer.topics()
        finally:
            consumer.close()
    except KafkaError as exc:
        raise SinkUnavailableError(f"could not list the topics at {bootstrap}: {exc}") from exc
    if topic not in known:
        raise SinkUnavailableError(
            f"the topic {topic} does not exist at {bootstrap} (a broker started before it was added)",
            fix=fixes.CREATE_TOPICS,
        )


def require_broker(bootstrap: str, *, timeout_s: float = 2.0) -> None:
    """Fail fast, with the fix, when no bootstrap server accepts a connection.

    Kafka clients retry an unreachable bootstrap for tens of seconds before they
    give up; a command that cannot work without the log says so at once instead.

    Raises:
        SinkUnavailableError: none of the bootstrap servers accepts TCP connections.
    """
    for server in bootstrap.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise SinkUnavailableError(f"bootstrap servers must be host:port[,host:port], got {bootstrap!r}")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    raise SinkUnavailableError(f"no Kafka broker answers at {bootstrap}", fix=fixes.START_BROKER)


def new_cluster_id() -> str:
    """A fresh KRaft cluster id (22 characters of URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def listen_port(host: str = "127.0.0.1") -> int:
    """A free TCP port for a broker to listen on, below the kernel's ephemeral port range.

    A port the kernel hands out for ``bind(0)`` lies in the ephemeral range, which is also where
    clients' outgoing connections get their local ports. While a broker is down its clients keep
    reconnecting to its port, and on loopback one attempt in about 28,000 is given that very port
    as its own local port: the socket connects to itself (TCP simultaneous open) and holds the port,
    so the broker cannot come back (the fault suite hit it after a SIGKILL of the cluster). A port
    below the range cannot be taken that way.
    """
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if low > 12_000:
        rng = random.Random()
        for _ in range(200):
            port = rng.randrange(10_000, low)
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:  # no room below the range: any free port
        s.bind((host, 0))
        return int(s.getsockname()[1])


_free_port = listen_port


@dataclass(frozen=True)
class BrokerStatus:
    """What ``trajlake status`` shows."""

    running: bool
    """Whether this home's broker process is alive and answering."""
    pid: int | None
    """Its process id."""
    bootstrap: str
    """Where clients connect."""
    data_dir: str
    """Its storage directory."""
    topics: dict[str, dict[int, int]] = field(default_factory=dict)
    """Topic -> partition -> end offset."""


@dataclass(frozen=True)
class Quorum:
    """The KRaft quorum a node belongs to (a single node is a quorum of one)."""

    voters: dict[int, int]
    """Node id -> its controller port (every node is broker and controller: combined mode)."""
    cluster_id: str
    replication: int = 1
    """Replication factor of the topics (and Kafka's internal topics)."""

    @property
    def min_insync(self) -> int:
        """``min.insync.replicas``: a write is acknowledged by a majority of the replicas."""
        return self.replication // 2 + 1 if self.replication >= 3 else 1


class EmbeddedKafka:
    """Prepare, start, stop and inspect this home's single-node KRaft broker (or one node of a cluster).

    Args:
        home: the trajlake home; the broker lives in ``home/kafka`` (``directory``, when given).
        bootstrap: ``host:port`` the broker listens on for clients (the first one, if several).
        topics: topics to create on start, with their partition counts.
        heap: JVM heap size.
        start_timeout_s: how long ``start`` waits for the broker to answer.
        progress: optional callback receiving human-readable progress lines.
        node_id: this node's id in ``quorum``.
        quorum: the cluster this node belongs to (default: a quorum of this node alone).
        directory: where this node keeps its files (a cluster gives each node its own).
    """

    def __init__(
        self,
        home: Path,
        bootstrap: str = "127.0.0.1:9092",
        *,
        topics: Mapping[str, int] | None = None,
        heap: str = "512m",
        start_timeout_s: float = 120.0,
        progress: Callable[[str], None] | None = None,
        node_id: int = 1,
        quorum: Quorum | None = None,
        directory: Path | None = None,
    ) -> None:
        self.home = Path(home).absolute()
        self.dir = Path(directory).absolute() if directory is not None else self.home / "kafka"
        self.data_dir = self.dir / "data"
        self.bootstrap = bootstrap
        self.host, self.port = parse_bootstrap(bootstrap)
        self.node_id = node_id
        self.quorum = quorum
        self.topics = dict(DEFAULT_TOPICS if topics is None else topics)
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self._progress = progress or (lambda msg: log.info("%s", msg))
        self.pid_file = self.dir / "broker.pid"
        self.state_file = self.dir / "broker.json"
        self.log_file = self.dir / "logs" / "server.log"
        self.stdout_file = self.dir / "logs" / "stdout.log"

    # ------------------------------------------------------------- prerequisites

    @staticmethod
    def check_java() -> str:
        """Path of a Java >= 17 runtime.

        Raises:
            BrokerError: no Java, or one too old for Kafka 4.
        """
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if not java or not Path(java).exists():
            raise BrokerUnavailableError(
                "Java not found: the embedded Kafka broker needs a Java 17+ runtime on PATH "
                "(e.g. `apt-get install openjdk-17-jre-headless`) or JAVA_HOME set"
            )
        out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
        m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
        if m:
            major = int(m.group(1))
            if major == 1 and m.group(2):
                major = int(m.group(2))
            if major < MIN_JAVA:
                raise BrokerUnavailableError(
                    f"Kafka 4 needs Java {MIN_JAVA}+, found Java {major} at {java}; install a newer one "
                    "(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
                )
        return java

    def classpath(self) -> str:
        """The broker's classpath, resolved by Maven once per pom digest.

        Raises:
            BrokerError: Maven is missing or could not resolve the jars.
        """
        from infra.maven import MavenError, build_classpath

        try:
            return os.pathsep.join(build_classpath(_pom_path(), "the Apache Kafka jars", self._progress))
        except MavenError as exc:
            raise BrokerUnavailableError(str(exc)) from exc

    @staticmethod
    def resolved_jars() -> list[str] | None:
        """The broker's jars if Maven resolved them before (``None``: the next start resolves them)."""
        from infra.maven import cached_classpath

        return cached_classpath(_pom_path())

    # ------------------------------------------------------------- state

    def _state(self) -> dict[str, Any]:
        if self.state_file.exists():
            try:
                state: dict[str, Any] = json.loads(self.state_file.read_text())
                return state
            except (OSError, json.JSONDecodeError) as exc:
                raise BrokerError(
                    f"broker state {self.state_file} is corrupted ({exc}); "
                    f"move {self.dir} away to start afresh"
                ) from exc
        return {}

    def _save_state(self, state: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    def pid(self) -> int | None:
        """The pid of this home's broker if its process is alive."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        if b"kafka.Kafka" not in cmdline or str(self.dir).encode() not in b" ".join(cmdline):
            return None  # the pid was reused by another process
        return pid

    def _write_config(self, state: dict[str, Any]) -> Path:
        quorum = self.quorum or Quorum({1: int(state["controller_port"])}, str(state["cluster_id"]))
        ctrl = quorum.voters[self.node_id]
        rf = str(quorum.replication)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(
                f"{n}@{self.host}:{p}" for n, p in sorted(quorum.voters.items())
            ),
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{ctrl}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "8",
            "default.replication.factor": rf,
            "min.insync.replicas": str(quorum.min_insync),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(quorum.min_insync),
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": str(quorum.min_insync),
            # a replica that falls behind is caught up, never elected with lost writes
            "unclean.leader.election.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # The log is the source of truth: keep it (replay reads from offset 0).
            "log.retention.ms": "-1",
            "log.retention.bytes": "-1",
            # the largest record the spool takes (16 MiB) plus batch framing; replicas fetch it whole
            "message.max.bytes": str(MAX_MESSAGE_BYTES),
            "replica.fetch.max.bytes": str(MAX_MESSAGE_BYTES),
        }
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.dir / "log4j2.yaml"
        log4j.write_text(
            "Configuration:\n"
            "  Appenders:\n"
            "    RollingFile:\n"
            "      name: File\n"
            f"      fileName: {self.log_file}\n"
            f"      filePattern: {self.log_file}.%i\n"
            '      PatternLayout: {pattern: "[%d] %p %m (%c)%n"}\n'
            "      SizeBasedTriggeringPolicy: {size: 20MB}\n"
            "      DefaultRolloverStrategy: {max: 3}\n"
            "  Loggers:\n"
            "    Root:\n"
            "      level: INFO\n"
            "      AppenderRef: [{ref: File}]\n"
            "    Logger:\n"
            "      - {name: kafka.request.logger, level: WARN}\n"
            "      - {name: state.change.logger, level: WARN}\n"
        )
        return path

    def _check_storage(self, state: dict[str, Any]) -> bool:
        """True when storage is formatted and consistent; False when absent.

        Raises:
            BrokerError: storage exists but is corrupted or belongs to another cluster.
        """
        if not self.data_dir.exists() or not any(self.data_dir.iterdir()):
            return False
        meta = self.data_dir / "meta.properties"
        hint = f"move {self.data_dir} away (its data will be lost) to start afresh"
        if not meta.exists():
            raise BrokerError(f"Kafka storage at {self.data_dir} is corrupted: no meta.properties; {hint}")
        try:
            text = meta.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise BrokerError(f"Kafka storage at {self.data_dir} is corrupted: {exc}; {hint}") from exc
        values = dict(
            line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
        )
        if "cluster.id" not in values or "node.id" not in values:
            raise BrokerError(
                f"Kafka storage at {self.data_dir} is corrupted: meta.properties lacks "
                f"cluster.id/node.id; {hint}"
            )
        if state.get("cluster_id") and values["cluster.id"].strip() != state["cluster_id"]:
            raise BrokerError(
                f"Kafka storage at {self.data_dir} belongs to cluster {values['cluster.id'].strip()}, "
                f"not this home's {state['cluster_id']}; {hint}"
            )
        return True

    # ------------------------------------------------------------- lifecycle

    def start(self) -> BrokerStatus:
        """Start the broker (formatting storage on first use) and create the topics.

        Idempotent: if this home's broker already runs, only ensures the topics.

        Raises:
            BrokerError: no Java or Maven, the port is taken by another process,
                the storage is corrupted, or the broker did not come up (its log
                tail is included).
        """
        proc = self.launch()
        if proc is not None:
            self.wait_ready(proc)
        self.ensure_topics()
        return self.status()

    def launch(self) -> subprocess.Popen[bytes] | None:
        """Format the storage on first use and start the broker's process; ``None`` if it already runs.

        The broker answers only once its quorum has a leader: a cluster launches every node,
        then waits (:meth:`wait_ready`).

        Raises:
            BrokerError: as :meth:`start`.
        """
        running = self.pid()
        if running is not None:
            if port_in_use(self.host, self.port):
                self._progress(f"broker already running (pid {running}) on {self.bootstrap}")
                return None
            raise BrokerError(
                f"broker process {running} of {self.dir} is alive but not answering on {self.bootstrap}",
                fix=fixes.STOP_BROKER_FIRST,
            )
        if port_in_use(self.host, self.port):
            raise BrokerError(
                f"port {self.port} on {self.host} is taken by another process (not this home's "
                f"broker); stop it or set TRAJLAKE_KAFKA_BOOTSTRAP to a free host:port"
            )
        java = self.check_java()
        cp = self.classpath()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        state = self._state()
        formatted = self._check_storage(state)
        if not state:
            state = {
                "cluster_id": self.quorum.cluster_id if self.quorum else new_cluster_id(),
                "controller_port": _free_port(self.host),
            }
            if formatted:  # storage from an earlier state file that was lost
                meta = (self.data_dir / "meta.properties").read_text()
                m = re.search(r"cluster\.id=(\S+)", meta)
                if m:
                    state["cluster_id"] = m.group(1)
            self._save_state(state)
        if self.quorum is None and port_in_use(self.host, int(state["controller_port"])):
            state["controller_port"] = _free_port(self.host)  # (a cluster's ports are the cluster's)
            self._save_state(state)
        config = self._write_config(state)
        jvm = [
            java,
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.yaml'}",
            "-cp",
            cp,
        ]
        if not formatted:
            self._progress(f"formatting Kafka storage at {self.data_dir}")
            proc = subprocess.run(
                [
                    *jvm,
                    "kafka.tools.StorageTool",
                    "format",
                    # "=" form: a base64 cluster id may start with "-".
                    f"--cluster-id={state['cluster_id']}",
                    f"--config={config}",
                    "--ignore-formatted",
                ],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise BrokerError(f"formatting Kafka storage failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
        self._progress(f"starting Kafka broker on {self.bootstrap}")
        with open(self.stdout_file, "ab") as out:
            proc_b = subprocess.Popen(
                [*jvm, "kafka.Kafka", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.dir,
            )
        self.pid_file.write_text(str(proc_b.pid))
        return proc_b

    def wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        """Wait until the broker :meth:`launch` started answers.

        Raises:
            BrokerError: it exited, or did not answer within ``start_timeout_s`` (killed then).
        """
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerError(f"Kafka broker exited with code {proc.returncode}:\n{self.log_tail()}")
            if port_in_use(self.host, self.port) and self._answers():
                return
            time.sleep(0.25)
        self._kill(proc.pid)
        raise BrokerError(f"Kafka broker did not answer within {self.start_timeout_s}s:\n{self.log_tail()}")

    def _answers(self) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap, request_timeout_ms=5000, bootstrap_timeout_ms=5000
            )
        except (KafkaError, OSError):
            return False
        try:
            admin.list_topics()
            return True
        except (KafkaError, OSError):
            return False
        finally:
            admin.close()

    def ensure_topics(self) -> None:
        """Create the configured topics that do not exist yet."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)
        rf = self.quorum.replication if self.quorum else 1
        configs = {"min.insync.replicas": str(self.quorum.min_insync)} if self.quorum else {}
        try:
            existing = set(admin.list_topics())
            missing = [
                NewTopic(t, n, rf, topic_configs=configs) for t, n in self.topics.items() if t not in existing
            ]
            if missing:
                self._progress(
                    "creating topics " + ", ".join(f"{t.name} ({t.num_partitions})" for t in missing)
                )
                try:
                    admin.create_topics(missing)
                except TopicAlreadyExistsError:
                    pass
                # Wait until the metadata of every topic is visible.
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    if set(self.topics) <= set(admin.list_topics()):
                        break
                    time.sleep(0.1)
        except KafkaError as exc:
            raise BrokerError(f"could not create topics on {self.bootstrap}: {exc}") from exc
        finally:
            admin.close()

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Stop the broker cleanly (SIGTERM; SIGKILL after ``timeout_s``).

        Returns:
            True if a broker was running.
        """
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        self._progress(f"stopping Kafka broker (pid {pid})")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                break
            time.sleep(0.1)
        else:
            self._kill(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> bool:
        """Kill the broker with SIGKILL (for crash tests); returns once its port is free again.

        Raises:
            BrokerError: the process or its listener outlived the kill by a minute.
        """
        pid = self.pid()
        if pid is None:
            return False
        self._kill(pid)
        # A JVM's exit is not instant: its memory goes before its sockets (so /proc no longer names
        # it while it still listens), and on a loaded machine that took over 10 s in the fault
        # suite. Returning earlier let a restart find the port "taken by another process".
        deadline = time.monotonic() + 60
        while (_alive(pid) or port_in_use(self.host, self.port)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid) or port_in_use(self.host, self.port):
            raise BrokerError(f"broker process {pid} still holds {self.bootstrap} a minute after SIGKILL")
        self.pid_file.unlink(missing_ok=True)
        return True

    @staticmethod
    def _kill(pid: int, wait_s: float = 60.0) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def status(self) -> BrokerStatus:
        """Broker liveness, topics and partition end offsets."""
        pid = self.pid()
        running = pid is not None and port_in_use(self.host, self.port)
        topics = topic_end_offsets(self.bootstrap) if running else {}
        return BrokerStatus(
            running=running, pid=pid, bootstrap=self.bootstrap, data_dir=str(self.data_dir), topics=topics
        )

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the broker's logs (for error messages)."""
        chunks = []
        for path in (self.stdout_file, self.log_file):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()
                interesting = [
                    line for line in text if "ERROR" in line or "Exception" in line or "FATAL" in line
                ]
                chunks.append(f"--- {path} ---\n" + "\n".join((interesting or text)[-lines:]))
        return "\n".join(chunks) or "(no broker log)"


def topic_end_offsets(bootstrap: str) -> dict[str, dict[int, int]]:
    """End offset of every partition of every topic but Kafka's own (empty when unreadable)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    topics: dict[str, dict[int, int]] = {}
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, request_timeout_ms=10000, enable_auto_commit=False
        )
    except (KafkaError, OSError) as exc:
        log.warning("could not read topic offsets: %s", exc)
        return topics
    try:
        for topic in sorted(consumer.topics()):
            if topic.startswith("__"):
                continue
            parts = sorted(consumer.partitions_for_topic(topic) or [])
            ends = consumer.end_offsets([TopicPartition(topic, p) for p in parts])
            topics[topic] = {
                tp.partition: off for tp, off in sorted(ends.items(), key=lambda kv: kv[0].partition)
            }
    except KafkaError as exc:
        log.warning("could not read topic offsets: %s", exc)
    finally:
        consumer.close()
    return topics


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped by its parent) counts as dead.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
