"""Exact linear algebra on small dense matrices."""

from .elimination import SingularMatrixError, det, inverse, rank, solve
from .matrix import Matrix

__all__ = ["Matrix", "SingularMatrixError", "det", "inverse", "rank", "solve"]
