"""A rollout-worker stand-in run as a subprocess by the Kafka tests.

Records ``episodes`` episodes of ``events`` events each and, after each record
call returns, appends the event id to a ledger file with one ``write`` (so the
ledger survives SIGKILL exactly like the recorder's promise does).

Usage: python recording_worker.py BOOTSTRAP HOME WORKER_ID TOPIC EPISODES EVENTS LEDGER [PAUSE_S [DELIVERY]]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ingest import EpisodeRecorder


def main() -> None:
    bootstrap, home, worker_id, topic, episodes, events, ledger = sys.argv[1:8]
    pause = float(sys.argv[8]) if len(sys.argv) > 8 else 0.0
    delivery = sys.argv[9] if len(sys.argv) > 9 else "shipper"
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    rec = EpisodeRecorder.open(
        bootstrap=bootstrap,
        home=Path(home),
        worker_id=worker_id,
        topic=topic,
        delivery=delivery,  # type: ignore[arg-type]
    )
    print(f"recovered {rec.delivery.stats.recovered}", flush=True)
    for e in range(int(episodes)):
        with rec.episode(task={"id": f"task-{e % 5}"}, policy={"id": worker_id}) as ep:
            os.write(fd, f"{ep.episode_id} 0 start\n".encode())
            for i in range(int(events) - 2):
                if i % 2 == 0:
                    eid = ep.model_call(completion=f"step {i} " + "x" * 600, latency_s=0.01)
                else:
                    eid = ep.annotate("progress", {"i": i})
                os.write(fd, f"{ep.episode_id} {i + 1} {eid}\n".encode())
                if pause:
                    time.sleep(pause)
            ep.end("success")
            os.write(fd, f"{ep.episode_id} {int(events) - 1} end\n".encode())
    rec.flush(timeout=120)
    rec.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
