#!/bin/sh
# Reference solution for datawrangle-006: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-006: JSON-lines events -> sorted CSV.
set -e
mkdir -p out
python3 - <<'PY'
import csv, datetime, json, re
from collections import Counter
from decimal import Decimal

TS = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(Z|[+-]\d{2}:\d{2})")

def parse_ts(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return datetime.datetime.fromtimestamp(v, datetime.timezone.utc)
    if not isinstance(v, str):
        return None
    m = TS.fullmatch(v)
    if not m:
        return None
    y, mo, d, h, mi, s, off = m.groups()
    if off == "Z":
        tz = datetime.timezone.utc
    else:
        sign = 1 if off[0] == "+" else -1
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))
    try:
        t = datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=tz)
    except ValueError:
        return None
    return t.astimezone(datetime.timezone.utc)

seen = set()
rows, rejected = [], []
dups = 0
types = Counter()
with open("data/events.jsonl", encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            rejected.append(n); continue
        if not isinstance(ev, dict):
            rejected.append(n); continue
        eid, ts, typ = ev.get("id"), parse_ts(ev.get("ts")), ev.get("type")
        if not isinstance(eid, str) or not eid or ts is None or not isinstance(typ, str) or not typ.strip():
            rejected.append(n); continue
        if eid in seen:
            dups += 1; continue
        seen.add(eid)
        typ = typ.strip().lower()
        types[typ] += 1
        user = ev.get("user") if isinstance(ev.get("user"), dict) else {}
        uid = user.get("id")
        uid = "" if uid is None else str(uid)
        props = ev.get("props") if isinstance(ev.get("props"), dict) else {}
        amt = props.get("amount")
        amt = "" if amt is None else f"{Decimal(str(amt)):.2f}"
        cur = props.get("currency")
        cur = cur.strip().upper() if isinstance(cur, str) else ""
        rows.append([eid, ts.strftime("%Y-%m-%dT%H:%M:%SZ"), uid, typ, amt, cur])

rows.sort(key=lambda r: (r[1], r[0]))
with open("out/events.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["event_id", "timestamp_utc", "user_id", "event_type", "amount", "currency"])
    w.writerows(rows)
with open("out/rejected_lines.txt", "w") as f:
    f.write("".join(f"{n}\n" for n in rejected))
with open("out/summary.json", "w") as f:
    json.dump({"accepted": len(rows), "duplicates": dups, "rejected": len(rejected),
               "by_type": dict(sorted(types.items()))}, f, indent=2)
    f.write("\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
