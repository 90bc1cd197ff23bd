"""Errors of the ingest package; third-party (Kafka) errors are translated here."""

from __future__ import annotations

from schemas.errors import InfraError, TrajlakeError, UnavailableError


class IngestError(TrajlakeError):
    """Root of every error raised by ``ingest``."""


class SpoolError(IngestError):
    """The durable local spool cannot be used."""


class SpoolLockedError(SpoolError):
    """Another live process owns this spool directory."""


class SpoolFullError(SpoolError, InfraError):
    """The spool reached its size bound and did not drain within the timeout.

    Nothing is dropped: the caller's event was not recorded and can be retried.
    """


class SpoolDiskFullError(SpoolError, InfraError):
    """No disk space for the spool: the record was not recorded; recording resumes once space is freed."""


class RecordTooLargeError(IngestError, ValueError):
    """A record is over the size limit the spool, the producers and the broker carry (16 MiB)."""


class SinkError(IngestError, InfraError):
    """The event sink (Kafka) failed."""


class SinkUnavailableError(SinkError, UnavailableError):
    """The sink cannot take events right now (broker down, metadata unavailable)."""


class SinkRejectedError(SinkError):
    """Kafka refuses a record for good (over the broker's size limit, an invalid topic).

    Retrying the same bytes cannot succeed; the record is kept in the spool's quarantine and counted.
    """


class DeliveryTimeoutError(IngestError):
    """``flush`` gave up before every recorded event was acknowledged."""


class EpisodeStateError(IngestError):
    """An episode was used out of order (e.g. an event after ``episode_ended``)."""


class BrokerError(IngestError):
    """The embedded Kafka broker could not be prepared, started, or stopped."""


class BrokerUnavailableError(BrokerError, UnavailableError):
    """The broker cannot be started here (no Java, no Maven, jars not resolvable) or does not answer."""


class ImportFormatError(IngestError):
    """A trajectory file is not in the format its importer reads."""
