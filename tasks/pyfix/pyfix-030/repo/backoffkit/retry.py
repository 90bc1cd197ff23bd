"""Call a function until it succeeds, sleeping according to a backoff policy."""

import time


class RetryError(Exception):
    """Raised when all attempts failed; ``__cause__`` is the last error."""

    def __init__(self, attempts):
        super().__init__(f"giving up after {attempts} attempts")
        self.attempts = attempts


def retry_call(fn, policy, max_attempts=None, retry_on=(Exception,), sleep=time.sleep, rng=None):
    """Call ``fn()`` until it returns, retrying on ``retry_on`` exceptions.

    ``max_attempts`` counts calls of ``fn``; ``None`` means retry forever.
    ``sleep`` and ``rng`` can be replaced, e.g. in tests.
    """
    attempt = 0
    while True:
        try:
            return fn()
        except retry_on as exc:
            attempt += 1
            if max_attempts is not None and attempt >= max_attempts:
                raise RetryError(attempt) from exc
            sleep(policy.delay(attempt - 1, rng))
