"""Waiting for another process's (or thread's) state: poll with a generous deadline, never sleep and hope.

Under load (a busy 2-core CI machine, a parallel copy of the suite) a process can take many
seconds to reach a state it reaches in milliseconds on an idle machine; a test that sleeps a
fixed time and then asserts the state is flaky, a test that polls is not.
"""

from __future__ import annotations

import time
from collections.abc import Callable

GENEROUS_S = 120.0
"""Default deadline: long enough for a loaded machine, short enough to fail a hung test."""


def wait_until(
    cond: Callable[[], object], *, timeout: float = GENEROUS_S, what: str = "the condition"
) -> None:
    """Return as soon as ``cond()`` is true; fail the test when ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout:.0f} s")
        time.sleep(0.02)
