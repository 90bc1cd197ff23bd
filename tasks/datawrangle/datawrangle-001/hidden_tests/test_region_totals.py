import hashlib
import json
from pathlib import Path

OUT = Path("out/region_totals.json")

EXPECTED = {
    "regions": {
        "east": {"orders": 13, "units": 61, "revenue": 2182.75},
        "north": {"orders": 26, "units": 161, "revenue": 5428.19},
        "south": {"orders": 12, "units": 102, "revenue": 2709.69},
        "west": {"orders": 20, "units": 125, "revenue": 4007.44},
    },
    "skipped_rows": 5,
}


def _load():
    assert OUT.is_file(), f"{OUT} was not produced"
    return json.loads(OUT.read_text())


def test_input_untouched():
    digest = hashlib.sha256(Path("data/sales.csv").read_bytes()).hexdigest()
    assert digest == "f405c34b5f01f47a50a33eb9ad3b265d8c3fe97055ed42e7e85e6308b6407caf"


def test_top_level_shape():
    data = _load()
    assert isinstance(data, dict)
    assert set(data) == {"regions", "skipped_rows"}
    assert set(data["regions"]) == {"east", "north", "south", "west"}


def test_skipped_rows():
    assert _load()["skipped_rows"] == 5


def test_orders_and_units():
    regions = _load()["regions"]
    for name, exp in EXPECTED["regions"].items():
        got = regions[name]
        assert set(got) == {"orders", "units", "revenue"}, name
        assert got["orders"] == exp["orders"], name
        assert got["units"] == exp["units"], name
        assert isinstance(got["units"], int), name


def test_revenue_rounded():
    regions = _load()["regions"]
    for name, exp in EXPECTED["regions"].items():
        got = regions[name]["revenue"]
        assert isinstance(got, (int, float)) and not isinstance(got, bool), name
        assert abs(got - exp["revenue"]) < 0.0001, (name, got)


def test_formatting():
    # the layout of the real result: an empty or hollow object formatted well earns nothing
    data = _load()
    assert set(data) == {"regions", "skipped_rows"}
    assert {name: got.get("orders") for name, got in data["regions"].items()} == {
        name: exp["orders"] for name, exp in EXPECTED["regions"].items()
    }
    text = OUT.read_text()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
