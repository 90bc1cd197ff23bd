"""Discrete-event scheduling."""

from .scheduler import Scheduler

__all__ = ["Scheduler"]
