#!/bin/sh
# Reference solution for datawrangle-001: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-001: per-region sales totals.
set -e
mkdir -p out
python3 - <<'PY'
import csv, json, re
from decimal import Decimal

regions = {}
skipped = 0
with open("data/sales.csv", newline="") as f:
    rows = csv.reader(f)
    header = [h.strip() for h in next(rows)]
    idx = {name: i for i, name in enumerate(header)}
    for row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        row = [c.strip() for c in row]
        region = row[idx["region"]].lower() if len(row) > idx["region"] else ""
        qty = row[idx["quantity"]] if len(row) > idx["quantity"] else ""
        price = row[idx["unit_price"]] if len(row) > idx["unit_price"] else ""
        if not region or not re.fullmatch(r"-?\d+", qty) or not re.fullmatch(r"-?\d+(\.\d+)?", price):
            skipped += 1
            continue
        q = int(qty)
        r = regions.setdefault(region, {"orders": 0, "units": 0, "revenue": Decimal("0")})
        r["orders"] += 1
        r["units"] += q
        r["revenue"] += q * Decimal(price)

out = {
    "regions": {
        k: {"orders": v["orders"], "units": v["units"],
            "revenue": float(v["revenue"].quantize(Decimal("0.01")))}
        for k, v in regions.items()
    },
    "skipped_rows": skipped,
}
with open("out/region_totals.json", "w") as f:
    f.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
