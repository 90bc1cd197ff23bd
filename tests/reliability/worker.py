"""A rollout-worker stand-in for the fault suite: records episodes until told to stop.

After each ``record`` call returns (the event is in the worker's spool: acknowledged), its
event id goes to the ledger with one ``write``, so the ledger holds exactly what the
recorder promised whatever kills the process.

Usage: python -m tests.reliability.worker BOOTSTRAP HOME WORKER_ID TOPIC LEDGER STOP_FILE
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ingest import EpisodeRecorder


def main() -> None:
    bootstrap, home, worker_id, topic, ledger, stop = sys.argv[1:7]
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    rec = EpisodeRecorder.open(bootstrap=bootstrap, home=Path(home), worker_id=worker_id, topic=topic)
    n = 0
    while not Path(stop).exists():
        with rec.episode(task={"id": f"task-{n % 5}"}, policy={"id": worker_id}, keep_events=True) as ep:
            os.write(fd, f"{ep.events[0].event_id}\n".encode())  # type: ignore[index]
            for i in range(8):
                eid = ep.model_call(completion=f"step {i} " + "x" * (200 + 37 * i), latency_s=0.01)
                os.write(fd, f"{eid}\n".encode())
                time.sleep(0.01)
            os.write(fd, f"{ep.end('success')}\n".encode())
        n += 1
    rec.flush(timeout=180)
    rec.close()


if __name__ == "__main__":
    main()
