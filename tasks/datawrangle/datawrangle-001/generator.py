"""Generated check of datawrangle-001: the procedure run on freshly drawn sales exports.

Each input set is a new ``data/sales.csv`` with the messy features the instruction
lists (quoted fields with commas, padded and mixed-case regions, blank and
whitespace-only lines, returns, rows to skip), always with at least one row to
skip. The output must equal the reference's as JSON (numbers within 1e-6) and be
laid out as the instruction says; anything less is not the task done.
"""

import json

INPUTS = ["data/sales.csv"]
OUTPUTS = ["out/region_totals.json"]

REGIONS = ["north", "south", "east", "west", "central", "coast"]
PRODUCTS = [
    "Widget",
    "Gadget",
    "Adapter",
    '"Cable, USB-C"',
    '"Lamp, desk (LED)"',
    "Monitor",
    "Notebook",
    '"Pens, box of 12"',
]
PRICES = ["4.50", "12.99", "9.10", "7.25", "24.00", "149.99", "3.35", "0.99", "18", "2.5"]


def _region(rng, name):
    shown = rng.choice([name, name.upper(), name.title(), name.capitalize()])
    return rng.choice(["", " ", "  "]) + shown + rng.choice(["", " ", "  "])


def inputs(rng):
    lines = ["order_id,date,region,product,quantity,unit_price"]
    regions = rng.sample(REGIONS, rng.randint(2, 5))
    n = rng.randint(25, 60)
    bad_at = set(rng.sample(range(n), rng.randint(1, 5)))
    for i in range(n):
        oid = 6000 + i
        date = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        region = _region(rng, rng.choice(regions))
        product = rng.choice(PRODUCTS)
        qty = str(rng.randint(1, 15) * (-1 if rng.random() < 0.1 else 1))
        price = rng.choice(PRICES)
        if rng.random() < 0.2:
            price = " " + price
        if i in bad_at:
            what = rng.randrange(3)
            if what == 0:
                region = rng.choice(["", "  "])
            elif what == 1:
                qty = rng.choice(["", "x", "3.5", "1e2", "--2"])
            else:
                price = rng.choice(["", "free", "1.2.3", "$4", ".5"])
        lines.append(",".join([str(oid), date, region, product, qty, price]))
        if rng.random() < 0.08:
            lines.append(rng.choice(["", "   ", "\t"]))
    return {"data/sales.csv": "\n".join(lines) + "\n"}


def _close(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) < 1e-6
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return a == b


def checks(expected, actual):
    out = {}
    for path in OUTPUTS:
        want, got = expected.get(path), actual.get(path)
        ok = False
        if want is not None and got is not None:
            try:
                text = got.decode("utf-8")
                data = json.loads(text)
                ok = text == json.dumps(data, indent=2, sort_keys=True) + "\n" and _close(
                    json.loads(want), data
                )
            except ValueError:
                ok = False
        out[path] = ok
    return out
