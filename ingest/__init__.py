"""The producer SDK: record episodes as events and deliver them to Kafka without loss.

Public API: :class:`EpisodeRecorder` / :class:`Episode`, the spool, the sinks,
the blob store, the embedded broker and the importers of other agents' formats.
"""

from ingest.blobs import BlobStore
from ingest.delivery import Delivery, DeliveryStats, SpooledDelivery
from ingest.errors import (
    BrokerError,
    BrokerUnavailableError,
    DeliveryTimeoutError,
    EpisodeStateError,
    ImportFormatError,
    IngestError,
    RecordTooLargeError,
    SinkError,
    SinkUnavailableError,
    SpoolDiskFullError,
    SpoolError,
    SpoolFullError,
    SpoolLockedError,
)
from ingest.kafka_sink import KafkaSink, KafkaSinkConfig, partition_of
from ingest.publish import publish_events
from ingest.recorder import DEFAULT_TOPIC, Episode, EpisodeRecorder, recording
from ingest.sink import EventSink, MemorySink
from ingest.spool import Spool, SpoolRecord
from schemas.events import SDK_VERSION

__all__ = [
    "DEFAULT_TOPIC",
    "SDK_VERSION",
    "BlobStore",
    "BrokerError",
    "BrokerUnavailableError",
    "Delivery",
    "DeliveryStats",
    "DeliveryTimeoutError",
    "Episode",
    "EpisodeRecorder",
    "EpisodeStateError",
    "EventSink",
    "ImportFormatError",
    "IngestError",
    "KafkaSink",
    "KafkaSinkConfig",
    "MemorySink",
    "SinkError",
    "SinkUnavailableError",
    "Spool",
    "RecordTooLargeError",
    "SpoolDiskFullError",
    "SpoolError",
    "SpoolFullError",
    "SpoolLockedError",
    "SpoolRecord",
    "SpooledDelivery",
    "partition_of",
    "publish_events",
    "recording",
]
