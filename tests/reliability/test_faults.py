"""The fault suite in CI: two seeds (one per runner) of SIGKILLs against workers, shippers, pipelines
and brokers.

``python -m tests.reliability.chaos --seeds N`` runs more (the closing note's run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.kafka_broker import listen_port
from ingest.kafka_cluster import KafkaCluster
from tests.reliability.chaos import run_seeds, table

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    port = listen_port()  # below the ephemeral range: brokers here are killed while clients retry
    c = KafkaCluster(tmp_path_factory.mktemp("cluster"), f"127.0.0.1:{port}", brokers=3)
    c.start()
    try:
        yield c
    finally:
        # the test has checked its data: a clean stop only waits (a KRaft quorum shutting down
        # node by node loses its majority; each stop then waits out its timeout, a minute in all)
        c.kill()


@pytest.mark.timeout(900)  # 2 seeds of faults, settling and a replay each: ~3 min alone, 6+ loaded
def test_no_acknowledged_event_is_lost_or_duplicated_under_faults(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    # seed 0 folds with Dask, seed 1 with the local runner (each seed draws its runner); the chaos
    # module runs as many more as one likes by hand
    results = run_seeds(cluster, tmp_path, [0, 1], window_s=18.0)
    print("\n" + table(results))
    assert sum(sum(r.faults.values()) for r in results) >= 6  # the faults did happen
    for r in results:
        assert r.acknowledged > 0 and r.lost == 0 and r.duplicated == 0 and r.gaps == 0, table([r])
        assert r.replay_equal, f"seed {r.seed}: the lake is not what a clean replay of the log gives"
