"""Token-bucket rate limiting."""

from .bucket import KeyedLimiter, TokenBucket

__all__ = ["KeyedLimiter", "TokenBucket"]
