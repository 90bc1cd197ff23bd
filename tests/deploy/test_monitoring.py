"""Monitoring: the alert rules pass promtool, and a real Prometheus scrapes a running pipeline and alerts.

The rules (``infra/prometheus/alerts.yml``) and their unit tests (``alerts_test.yml``) go through
Debian's ``promtool``; the end-to-end test runs ``trajlake pipeline run --follow --metrics-port``
and a ``prometheus`` server scraping it every second with the real rule file, its windows
shortened (10 minutes to 20 seconds, ``for`` to 1 second: the expressions are the shipped ones),
feeds the log records that cannot be parsed, and waits for ``TrajlakeQuarantineRateHigh`` to fire.

``./dev`` installs ``prometheus`` as root; where it is missing the tests skip, unless
``TRAJLAKE_REQUIRE_SANDBOXES=1`` (CI: the real programs must run) makes that a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api import create_app
from ingest.kafka_broker import EmbeddedKafka
from tests.conftest import free_port
from tests.pipelines.log_workload import produce
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "infra" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "infra" / "prometheus" / "alerts_test.yml"
TRAJLAKE = str(Path(sys.executable).with_name("trajlake"))


def _require(program: str) -> str:
    found = shutil.which(program)
    if found:
        return found
    why = f"{program} is not installed (apt-get install prometheus; `./dev` does it as root)"
    if os.environ.get("TRAJLAKE_REQUIRE_SANDBOXES") == "1":
        pytest.fail(f"{why}, and TRAJLAKE_REQUIRE_SANDBOXES=1 requires the real programs")
    pytest.skip(why)


def test_the_alert_rules_pass_promtool_check_and_their_unit_tests() -> None:
    promtool = _require("promtool")
    check = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 12 rules found" in check.stdout + check.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    config = subprocess.run(
        [promtool, "check", "config", str(RULES.with_name("prometheus.yml"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert config.returncode == 0, config.stdout + config.stderr  # the compose stack's, with the rules
    # every alert has a unit test that expects it to fire
    alerts = set(re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), re.M))
    expected = set(re.findall(r"^\s+alertname: (\w+)$", RULE_TESTS.read_text(), re.M))
    assert len(alerts) == 12 and alerts == expected


def _shortened(rules: str) -> str:
    """The shipped rules with windows a test can wait for: same expressions, same thresholds."""
    return re.sub(r"for: \d+m", "for: 1s", rules.replace("[10m]", "[20s]"))


@pytest.fixture
def servers(tmp_path: Path, topics_env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A following pipeline with a metrics port, and a Prometheus server scraping it."""
    prometheus = _require("prometheus")
    metrics_port, prom_port = free_port(), free_port()
    env = {**os.environ, **topics_env, "TRAJLAKE_HOME": str(tmp_path / "home")}
    pipeline = subprocess.Popen(
        [TRAJLAKE, "pipeline", "run", "--follow", "--interval", "0.2", "--lake", str(tmp_path / "lake"),
         "--metrics-port", str(metrics_port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    (tmp_path / "rules.yml").write_text(_shortened(RULES.read_text()))
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yml]\n"
        "scrape_configs:\n"
        f"  - job_name: pipeline\n    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n"
    )
    prom = subprocess.Popen(
        [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
    )  # fmt: skip
    try:
        yield {"env": env, "prom": f"http://127.0.0.1:{prom_port}", "pipeline": pipeline, "tmp": tmp_path}
    finally:
        for proc in (pipeline, prom):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (pipeline, prom):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    try:
        r = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=5)
    except httpx.TransportError:
        return []
    return r.json()["data"]["result"] if r.status_code == 200 else []


def _firing(base: str, name: str) -> list[dict[str, Any]]:
    try:
        alerts = httpx.get(f"{base}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    except (httpx.TransportError, ValueError, KeyError):
        return []
    return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def test_prometheus_scrapes_a_running_pipeline_and_the_quarantine_alert_fires(
    servers: dict[str, Any], kafka: EmbeddedKafka
) -> None:
    prom, env = servers["prom"], servers["env"]
    # the pipeline is scraped (its lag is known: nothing waits yet) before anything is produced,
    # so the counters' rise falls inside Prometheus' window
    wait_until(
        lambda: _query(prom, 'up{job="pipeline"} == 1') and _query(prom, "trajlake_pipeline_consumer_lag"),
        what="Prometheus scraping the pipeline's metrics port",
    )
    assert not _firing(prom, "TrajlakeQuarantineRateHigh")
    topic = env["TRAJLAKE_TOPIC_EPISODES"]
    produce(kafka.bootstrap, [(topic, f"k{i}".encode(), b"\xffnot an event %d" % i) for i in range(40)])
    wait_until(
        lambda: _firing(prom, "TrajlakeQuarantineRateHigh"),
        what="TrajlakeQuarantineRateHigh firing",
    )
    alert = _firing(prom, "TrajlakeQuarantineRateHigh")[0]
    assert alert["labels"]["job"] == "pipeline" and alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["summary"].startswith("More than 1% of the records folded on 127.0.0.1:")
    # what Prometheus holds is what the pipeline did: 40 records read, 40 quarantined, nothing left
    quarantined = _query(prom, 'trajlake_pipeline_quarantined_total{job="pipeline"}')
    assert [float(q["value"][1]) for q in quarantined] == [40.0]
    assert [float(r["value"][1]) for r in _query(prom, "trajlake_pipeline_records_total")] == [40.0]
    wait_until(lambda: _query(prom, "sum(trajlake_pipeline_consumer_lag) == 0"), what="the lag back to zero")
    assert servers["pipeline"].poll() is None, servers["pipeline"].communicate()

    # the workbench's health panel: the lake's quarantine, and what this Prometheus says
    lake = servers["tmp"] / "lake"
    with TestClient(create_app(lake, prometheus_url=prom)) as c:
        health = c.get("/platform").json()
    assert health["quarantine"]["rows"] == 40 and health["quarantine"]["last_hour"] == 40
    assert sum(r["count"] for r in health["quarantine"]["reasons"]) == 40
    panel = health["prometheus"]
    assert panel["error"] is None and panel["values"]["pipeline_lag"] == 0
    assert panel["values"]["quarantine_rate"] is not None and panel["values"]["quarantine_rate"] > 0.01
    assert panel["values"]["sandbox_pool_size"] is None  # no sandbox pool is scraped here
    firing = [a for a in panel["alerts"] if a["state"] == "firing"]
    assert [a["name"] for a in firing] == ["TrajlakeQuarantineRateHigh"]
    # a Prometheus that does not answer is said, and the lake's half still comes
    with TestClient(create_app(lake, prometheus_url=f"http://127.0.0.1:{free_port()}")) as c:
        r = c.get("/platform")
    assert r.status_code == 200 and r.json()["quarantine"]["rows"] == 40
    assert r.json()["prometheus"]["error"].startswith("Prometheus at http://127.0.0.1:")
    with TestClient(create_app(lake)) as c:
        assert c.get("/platform").json()["prometheus"] is None
