"""Chunking and batching helpers."""

from .chunks import batched, chunk_stats, split_evenly, windowed

__all__ = ["batched", "chunk_stats", "split_evenly", "windowed"]
