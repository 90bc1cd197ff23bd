"""One behavioural contract for every EventSink: the in-memory one and real Kafka."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from ingest import EventSink, KafkaSink, KafkaSinkConfig, MemorySink, partition_of
from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_log
from ingest.sink import Receipt


def wait_done(receipts: list[Receipt], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not all(r.is_done for r in receipts):
        assert time.monotonic() < deadline, "receipts not done in time"
        time.sleep(0.01)


class SinkContract:
    """Subclasses provide ``sink`` and ``delivered(topic)`` -> [(key, value)] in log order."""

    topic_name = "contract"

    def make(self) -> EventSink:
        raise NotImplementedError

    def delivered(self, sink: EventSink) -> list[tuple[bytes, bytes]]:
        raise NotImplementedError

    def test_every_record_is_acknowledged_and_delivered_once(self) -> None:
        sink = self.make()
        sent = [(b"ep-%d" % (i % 7), b"value-%d" % i) for i in range(500)]
        receipts = [sink.send(self.topic_name, k, v) for k, v in sent]
        sink.flush(30)
        wait_done(receipts)
        assert all(r.exception is None for r in receipts)
        got = self.delivered(sink)
        assert sorted(got) == sorted(sent)
        sink.close()

    def test_records_of_one_key_keep_their_order(self) -> None:
        sink = self.make()
        for i in range(300):
            sink.send(self.topic_name, b"ep-%d" % (i % 3), b"%06d" % i)
        sink.flush(30)
        by_key: dict[bytes, list[bytes]] = defaultdict(list)
        for k, v in self.delivered(sink):
            by_key[k].append(v)
        assert set(by_key) == {b"ep-0", b"ep-1", b"ep-2"}
        for values in by_key.values():
            assert values == sorted(values)
        sink.close()

    def test_explicit_partition_matches_the_key_mapping(self) -> None:
        sink = self.make()
        p = sink.partition_for(self.topic_name, b"some-episode")
        assert p is not None and 0 <= p < 8
        assert sink.partition_for(self.topic_name, b"some-episode") == p
        sink.close()

    def test_probe_reports_a_working_sink(self) -> None:
        sink = self.make()
        assert sink.probe()
        sink.close()


class TestMemorySink(SinkContract):
    def make(self) -> EventSink:
        return MemorySink()

    def delivered(self, sink: EventSink) -> list[tuple[bytes, bytes]]:
        assert isinstance(sink, MemorySink)
        return [(k, v) for t, k, v in sink.records if t == self.topic_name]


@pytest.mark.kafka
class TestKafkaSink(SinkContract):
    @pytest.fixture(autouse=True)
    def _broker(self, kafka: EmbeddedKafka, topic: str) -> None:
        self.bootstrap = kafka.bootstrap
        self.topic_name = topic

    def make(self) -> EventSink:
        return KafkaSink(KafkaSinkConfig(bootstrap_servers=self.bootstrap))

    def delivered(self, sink: EventSink) -> list[tuple[bytes, bytes]]:
        return [(k or b"", v) for _, _, _, k, v in read_log(self.bootstrap, self.topic_name)]

    @pytest.mark.parametrize(
        ("key", "java_murmur2"),
        [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"abc", 479470107),
        ],
    )
    def test_partition_is_the_java_client_partition(self, key: bytes, java_murmur2: int) -> None:
        # Test vectors of Kafka's Java Utils.murmur2; partition = toPositive(hash) % n.
        assert partition_of(key, 8) == (java_murmur2 & 0x7FFFFFFF) % 8
        assert partition_of(key, 5) == (java_murmur2 & 0x7FFFFFFF) % 5

    def test_explicit_partition_is_where_the_key_would_go(self) -> None:
        sink = self.make()
        key = b"episode-42"
        assert sink.partition_for(self.topic_name, key) == partition_of(key, 8)
        # Sent without an explicit partition, kafka-python's partitioner agrees.
        receipt = sink.send(self.topic_name, key, b"x")
        sink.flush(30)
        wait_done([receipt])
        assert receipt.value.partition == partition_of(key, 8)  # type: ignore[attr-defined]
        sink.close()

    def test_unreachable_broker_is_translated(self) -> None:
        from ingest import SinkUnavailableError

        sink = KafkaSink(KafkaSinkConfig(bootstrap_servers="127.0.0.1:1", max_block_ms=1500))
        assert not sink.probe()
        with pytest.raises(SinkUnavailableError):
            sink.send(self.topic_name, b"k", b"v")
        sink.close()


@pytest.mark.kafka
class TestConfluentKafkaSink(SinkContract):
    """The librdkafka adapter passes the same contract (``KafkaSinkConfig(client="confluent")``)."""

    @pytest.fixture(autouse=True)
    def _broker(self, kafka: EmbeddedKafka, topic: str) -> None:
        self.bootstrap = kafka.bootstrap
        self.topic_name = topic

    def make(self) -> EventSink:
        from ingest.kafka_sink import make_sink

        sink = make_sink(KafkaSinkConfig(bootstrap_servers=self.bootstrap, client="confluent"))
        assert type(sink).__name__ == "ConfluentKafkaSink"
        return sink

    def delivered(self, sink: EventSink) -> list[tuple[bytes, bytes]]:
        return [(k or b"", v) for _, _, _, k, v in read_log(self.bootstrap, self.topic_name)]

    def test_librdkafka_puts_a_key_where_partition_for_says(self) -> None:
        sink = self.make()
        keys = [b"episode-%d" % i for i in range(40)]
        receipts = [sink.send(self.topic_name, k, b"x") for k in keys]  # no explicit partition
        sink.flush(30)
        wait_done(receipts)
        assert [r.partition for r in receipts] == [sink.partition_for(self.topic_name, k) for k in keys]  # type: ignore[attr-defined]
        assert all(r.partition == partition_of(k, 8) for r, k in zip(receipts, keys, strict=True))  # type: ignore[attr-defined]
        sink.close()

    def test_a_record_kafka_refuses_fails_as_rejected_and_others_go_on(self) -> None:
        from ingest.errors import SinkRejectedError

        sink = self.make()
        receipts = []
        with pytest.raises(SinkRejectedError) as refused:
            receipts.append(sink.send(self.topic_name, b"k", b"v" * (sink.config.max_request_bytes + 1)))  # type: ignore[attr-defined]
        assert "refuses the record for good" in str(refused.value)
        ok = sink.send(self.topic_name, b"k", b"small")
        sink.flush(30)
        wait_done([ok])
        assert ok.exception is None and receipts == []
        sink.close()

    def test_unreachable_broker_and_an_unknown_client_are_translated(self) -> None:
        from ingest import SinkError, SinkUnavailableError
        from ingest.confluent_sink import ConfluentKafkaSink

        sink = ConfluentKafkaSink(KafkaSinkConfig(bootstrap_servers="127.0.0.1:1", max_block_ms=1500))
        assert not sink.probe()
        with pytest.raises(SinkUnavailableError):
            sink.send(self.topic_name, b"k", b"v")
        assert sink.partition_for(self.topic_name, b"k") is None
        sink.close()
        with pytest.raises(SinkError, match="unknown Kafka client 'rdkafka'"):
            KafkaSinkConfig(client="rdkafka")
