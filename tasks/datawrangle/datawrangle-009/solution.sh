#!/bin/sh
# Reference solution for datawrangle-009: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-009: apply a rename plan simultaneously and write a manifest.
set -e
mkdir -p out
python3 - <<'PY'
import csv, hashlib, json, os
from collections import Counter

ROOT = "photos"
rows = []
with open("rename_map.csv", encoding="utf-8", newline="") as f:
    lines = f.read().split("\n")
for line in lines[1:]:
    line = line.rstrip("\r")
    if not line.strip() or line.strip().startswith("#"):
        continue
    rec = next(csv.reader([line])) + ["", ""]
    rows.append({"old": rec[0].strip(), "new": rec[1].strip()})

def valid_path(p):
    if not p or p.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in p.split("/"))

def is_file(p):
    return os.path.isfile(os.path.join(ROOT, p))

def exists(p):
    return os.path.lexists(os.path.join(ROOT, p))

for r in rows:
    r["sha256"] = hashlib.sha256(open(os.path.join(ROOT, r["old"]), "rb").read()).hexdigest() \
        if r["old"] and valid_path(r["old"]) and is_file(r["old"]) else ""
    r["status"] = None if valid_path(r["old"]) and valid_path(r["new"]) else "invalid"

olds = Counter(r["old"] for r in rows if r["status"] is None)
news = Counter(r["new"] for r in rows if r["status"] is None)
for r in rows:
    if r["status"] is None and (olds[r["old"]] > 1 or news[r["new"]] > 1):
        r["status"] = "conflict"
for r in rows:
    if r["status"] is None and not is_file(r["old"]):
        r["status"] = "missing"
    if r["status"] is None and r["old"] == r["new"]:
        r["status"] = "unchanged"

tentative = [r for r in rows if r["status"] is None]
changed = True
while changed:
    changed = False
    freed = {r["old"] for r in tentative}
    for r in list(tentative):
        if exists(r["new"]) and r["new"] not in freed:
            r["status"] = "blocked"
            tentative.remove(r)
            changed = True
for r in tentative:
    r["status"] = "renamed"

# apply all renames simultaneously: first move sources aside, then into place
staged = []
for i, r in enumerate(tentative):
    tmp = os.path.join(ROOT, f".__rename_tmp_{i}")
    os.rename(os.path.join(ROOT, r["old"]), tmp)
    staged.append((tmp, os.path.join(ROOT, r["new"])))
for tmp, dst in staged:
    os.makedirs(os.path.dirname(dst) or ROOT, exist_ok=True)
    os.rename(tmp, dst)

with open("out/manifest.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["old", "new", "status", "sha256"])
    for r in rows:
        w.writerow([r["old"], r["new"], r["status"], r["sha256"]])
counts = Counter(r["status"] for r in rows)
with open("out/summary.json", "w") as f:
    json.dump({s: counts.get(s, 0) for s in ["renamed", "unchanged", "blocked", "conflict", "missing", "invalid"]},
              f, indent=2)
    f.write("\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
