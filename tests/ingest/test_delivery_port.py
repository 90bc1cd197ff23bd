"""The ``Delivery`` port: both adapters (inline, shipper) pass the same behavioural test on a real broker."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from ingest import Delivery, KafkaSinkConfig, Spool, SpooledDelivery
from ingest.kafka_broker import EmbeddedKafka
from ingest.kafka_sink import make_sink
from ingest.log_reader import read_log
from ingest.shipper import ShippedDelivery

pytestmark = pytest.mark.kafka


def make(kind: str, directory: Path, bootstrap: str) -> Delivery:
    """``inline`` or ``shipper``, on kafka-python or (``-confluent``) librdkafka."""
    spool = Spool(directory)
    how, _, client = kind.partition("-")
    cfg = KafkaSinkConfig(bootstrap_servers=bootstrap, client=client or "kafka-python")
    return SpooledDelivery(spool, make_sink(cfg)) if how == "inline" else ShippedDelivery(spool, cfg)


@pytest.mark.parametrize("kind", ["inline", "shipper", "inline-confluent", "shipper-confluent"])
def test_every_submitted_record_is_acknowledged_once_in_key_order(
    kind: str, kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    delivery = make(kind, tmp_path / "spool", kafka.bootstrap)
    assert isinstance(delivery, Delivery)
    keys = [f"ep-{k}".encode() for k in range(7)]
    sent: dict[bytes, list[bytes]] = defaultdict(list)
    try:
        for i in range(700):
            key = keys[i % len(keys)]
            value = f"{key.decode()}:{i}".encode() + b"x" * (i % 97)
            delivery.submit(topic, key, value, partition=delivery.partition_for(topic, key))
            sent[key].append(value)
        delivery.flush(timeout=120)
        assert delivery.pending == 0 and delivery.healthy
        assert delivery.stats.submitted == 700
    finally:
        delivery.close(timeout=30)
    got: dict[bytes, list[bytes]] = defaultdict(list)
    for _, _, _, key, value in read_log(kafka.bootstrap, topic):
        assert key is not None
        got[key].append(value)
    assert got == sent  # every record, once, each key's records in the order submitted
    # nothing is left for a next process to re-send
    again = make(kind, tmp_path / "spool", kafka.bootstrap)
    try:
        assert again.pending == 0 and again.stats.recovered == 0
    finally:
        again.close(timeout=10)
