"""Driver details: runner selection and the offsets a replay from a time starts at."""

from __future__ import annotations

import datetime as dt

import pytest
from kafka import KafkaProducer

from ingest.kafka_broker import EmbeddedKafka
from pipelines import PipelineConfig
from pipelines.log_pipeline import _options, offsets_for_time


def test_the_local_runner_is_set_explicitly_with_workers() -> None:
    runner, opts = _options(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", num_workers=3))
    assert type(runner).__name__ == "FnApiRunner"
    all_opts = opts.get_all_options()
    assert all_opts["direct_num_workers"] == 3
    assert all_opts["direct_running_mode"] == "multi_processing"


def test_a_small_batch_runs_in_process_and_a_large_one_on_the_workers() -> None:
    cfg = PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", num_workers=2, in_process_below=20_000)
    modes = {n: _options(cfg, n)[1].get_all_options()["direct_running_mode"] for n in (1999, 19_999, 20_000)}
    assert modes == {1999: "in_memory", 19_999: "in_memory", 20_000: "multi_processing"}
    never = PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", in_process_below=0)
    assert _options(never, 5)[1].get_all_options()["direct_running_mode"] == "multi_processing"


def test_portable_runner_options_are_handed_to_beam() -> None:
    args = ["--runner=FlinkRunner", "--flink_master=localhost:8081", "--environment_type=LOOPBACK"]
    runner, opts = _options(PipelineConfig(bootstrap="x:1", lake_root="/tmp/l", beam_args=args))
    assert runner is None  # Beam builds the runner the options name
    all_opts = opts.get_all_options()
    assert all_opts["runner"] == "FlinkRunner" and all_opts["flink_master"] == "localhost:8081"


@pytest.mark.kafka
def test_replay_from_a_time_starts_at_the_first_offset_at_or_after_it(
    kafka: EmbeddedKafka, topic: str
) -> None:
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    prod = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    for i in range(10):
        ts = int((t0 + dt.timedelta(minutes=i)).timestamp() * 1000)
        prod.send(topic, key=b"k", value=b"v", partition=0, timestamp_ms=ts)
    prod.flush()
    prod.close()
    offsets = offsets_for_time(kafka.bootstrap, (topic,), t0 + dt.timedelta(minutes=4, seconds=30))
    assert offsets[(topic, 0)] == 5
    assert offsets[(topic, 1)] == 0  # an empty partition: its end
    late = offsets_for_time(kafka.bootstrap, (topic,), t0 + dt.timedelta(days=1))
    assert late[(topic, 0)] == 10


@pytest.mark.kafka
def test_a_lake_of_another_log_is_refused_not_silently_skipped(fresh_broker: EmbeddedKafka, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from lake import Lake, OffsetRange, app_id
    from pipelines import PipelineError, run_once
    from schemas.tables import TABLES

    fresh_broker.start()
    cfg = PipelineConfig(bootstrap=fresh_broker.bootstrap, lake_root=str(tmp_path / "lake"),
                         topics=("trajlake.episodes",), control_topics={})  # fmt: skip
    lake = Lake(cfg.lake_root)
    lake.ensure()
    # the lake holds offsets 0..499 of partition 0 of some log; this broker's log is empty
    r = OffsetRange("trajlake.episodes", 0, 0, 500)
    import pyarrow as pa

    from lake.store import PIPELINE_TABLES

    for name in PIPELINE_TABLES:
        lake.write(name, pa.Table.from_pylist([], TABLES[name]), mode="upsert",
                   txns={app_id(cfg.name, r.topic, r.partition): r.last})  # fmt: skip
    with pytest.raises(PipelineError, match="built from another log"):
        run_once(cfg)
