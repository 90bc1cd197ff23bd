"""`trajlake up --brokers 3`: a KRaft cluster on loopback that loses a broker and nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lake import Lake
from tests.conftest import FIXTURES, free_port
from tests.waiting import wait_until

TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))
pytestmark = pytest.mark.kafka


def _run(
    home: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k != "TRAJLAKE_KAFKA_BOOTSTRAP"}
    e |= {"TRAJLAKE_HOME": str(home), "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([TRAJLAKE, *args], env=e, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_a_three_broker_cluster_loses_a_broker_and_no_event(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    try:
        _run(home, "up", "--brokers", "3", env={"TRAJLAKE_KAFKA_BOOTSTRAP": f"127.0.0.1:{port}"})
        st = json.loads(_run(home, "status", "--json").stdout)
        assert [b["id"] for b in st["brokers"]] == [1, 2, 3] and all(b["alive"] for b in st["brokers"])
        assert st["brokers"][0]["port"] == port and len(st["bootstrap"].split(",")) == 3
        assert st["controller"] in (1, 2, 3) and st["under_replicated"] == []
        # the topics are replicated three times with a write quorum of two
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=st["bootstrap"])
        try:
            parts = admin.describe_topics(["trajlake.episodes"])[0]["partitions"]
        finally:
            admin.close()
        assert all(len(p["replica_nodes"]) == 3 for p in parts)

        # one broker's process killed, as a crash would: status says so, recording goes on
        victim = st["brokers"][0]
        os.kill(victim["pid"], signal.SIGKILL)
        after = json.loads(_run(home, "status", "--json").stdout)
        assert [b["alive"] for b in after["brokers"]] == [False, True, True] and after["running"]
        # once the controller has fenced it, its replicas are out of sync (polled: that takes seconds)
        wait_until(lambda: json.loads(_run(home, "status", "--json").stdout)["under_replicated"],
                   what="the killed broker's partitions reported under-replicated")  # fmt: skip
        _run(home, "import", *(str(p) for p in sorted((FIXTURES / "openhands").glob("*.json"))))
        _run(home, "pipeline", "run", "--once")
        ids = Counter(Lake(home / "lake").read("events").column("event_id").to_pylist())
        assert ids and max(ids.values()) == 1
        episodes = Lake(home / "lake").read("episodes")
        assert episodes.num_rows == 2 and set(episodes.column("completeness").to_pylist()) == {"complete"}

        # it comes back and catches up; one broker can be stopped on its own
        _run(home, "up")
        healed = json.loads(_run(home, "status", "--json").stdout)
        assert all(b["alive"] for b in healed["brokers"]) and healed["under_replicated"] == []
        _run(home, "down", "--broker", "2")
        assert [b["alive"] for b in json.loads(_run(home, "status", "--json").stdout)["brokers"]] == [
            True,
            False,
            True,
        ]
        bad = _run(home, "down", "--broker", "7", check=False)
        assert bad.returncode == 2 and "no broker 7" in bad.stderr
        mismatch = _run(home, "up", "--brokers", "5", check=False)
        assert mismatch.returncode != 0 and "holds a cluster of 3 brokers" in " ".join(
            mismatch.stderr.split()
        )
    finally:
        _run(home, "down", check=False)
