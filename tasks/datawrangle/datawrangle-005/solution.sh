#!/bin/sh
# Reference solution for datawrangle-005: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-005: join orders to customers.
set -e
mkdir -p out
python3 - <<'PY'
import csv
from decimal import Decimal

def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        header = [h.strip() for h in next(r)]
        for row in r:
            if not row or all(not c.strip() for c in row):
                continue
            yield dict(zip(header, (c.strip() for c in row)))

customers = {}
order = []
for c in read("data/customers.csv"):
    cid = c["customer_id"].upper()
    if cid in customers:
        continue
    customers[cid] = {"name": c["name"], "country": c["country"].upper(), "n": 0, "total": Decimal("0")}
    order.append(cid)

details, orphans = [], []
for o in read("data/orders.csv"):
    cid = o["customer_id"].upper()
    amt = Decimal(o["amount"])
    if cid in customers:
        c = customers[cid]
        c["n"] += 1
        c["total"] += amt
        details.append([int(o["order_id"]), cid, c["name"], c["country"], f"{amt:.2f}"])
    else:
        orphans.append([int(o["order_id"]), cid, o["order_date"], f"{amt:.2f}"])

def write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)

write("out/order_details.csv", ["order_id", "customer_id", "customer_name", "country", "amount"], sorted(details))
write("out/orphan_orders.csv", ["order_id", "customer_id", "order_date", "amount"], sorted(orphans))
totals = sorted(order, key=lambda cid: (-customers[cid]["total"], cid))
write("out/customer_totals.csv", ["customer_id", "customer_name", "order_count", "total_amount"],
      [[cid, customers[cid]["name"], customers[cid]["n"], f"{customers[cid]['total']:.2f}"] for cid in totals])
PY
TRAJLAKE_SOLVE
sh solve.sh
