import csv
import hashlib
import json
from pathlib import Path

OUT = Path("out")

EXPECTED_COUNTS = [
    ("200", 74), ("404", 13), ("304", 10), ("500", 7), ("302", 6), ("502", 6),
    ("301", 5), ("401", 5), ("201", 4), ("206", 4), ("403", 4), ("503", 2), ("400", 1),
]


def _read(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    return p.read_text()


def test_input_untouched():
    digest = hashlib.sha256(Path("logs/access.log").read_bytes()).hexdigest()
    assert digest == "57fb89932b932ccc6b67c7d8774767d00de6106b03b95045b570fa0384872258"


def test_status_counts_header_and_rows():
    text = _read("status_counts.csv")
    assert text.endswith("\n")
    lines = text.split("\n")[:-1]
    assert lines[0] == "status,count"
    rows = [tuple(r) for r in csv.reader(lines[1:])]
    assert rows == [(s, str(c)) for s, c in EXPECTED_COUNTS]


def test_status_counts_total_matches_requests():
    rows = list(csv.DictReader(_read("status_counts.csv").splitlines()))
    assert sum(int(r["count"]) for r in rows) == 141


def test_summary():
    summary = json.loads(_read("summary.json"))
    assert summary == {
        "requests": 141,
        "malformed": 6,
        "bytes": 3211215,
        "by_class": {"2xx": 82, "3xx": 21, "4xx": 23, "5xx": 15},
    }


def test_malformed_lines():
    text = _read("malformed_lines.txt")
    assert text.endswith("\n")
    assert text.split("\n")[:-1] == ["6", "31", "112", "122", "131", "151"]
