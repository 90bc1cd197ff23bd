"""backoffkit - exponential backoff policies and a retry helper."""

from .policy import Backoff
from .retry import RetryError, retry_call

__all__ = ["Backoff", "RetryError", "retry_call"]
