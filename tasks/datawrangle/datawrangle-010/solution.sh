#!/bin/sh
# Reference solution for datawrangle-010: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-010: validate employee records.
set -e
mkdir -p out
python3 - <<'PY'
import csv, datetime, json, re
from decimal import Decimal

CODES = ["bad_field_count", "bad_id", "duplicate_id", "missing_name", "bad_email",
         "bad_department", "bad_hire_date", "bad_salary", "bad_manager"]
DEPTS = {"engineering", "sales", "marketing", "finance", "hr", "support"}
EMAIL = re.compile(r"^[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)+$")
SAL = re.compile(r"^(\d+|\d{1,3}(,\d{3})+)(\.\d{1,2})?$")
CUTOFF = datetime.date(2024, 6, 30)

with open("data/employees.csv", encoding="utf-8", newline="") as f:
    lines = f.read().split("\n")
header = lines[0].rstrip("\r")
records = []
for n, line in enumerate(lines[1:], 2):
    line = line.rstrip("\r")
    if not line.strip():
        continue
    records.append((n, [c.strip() for c in next(csv.reader([line]))]))

good_ids = {r[0] for _, r in records if len(r) == 7 and re.fullmatch(r"[1-9][0-9]*", r[0])}

def date_ok(s):
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
        return False
    try:
        return datetime.date.fromisoformat(s) <= CUTOFF
    except ValueError:
        return False

seen = set()
valid, invalid = [], []
counts = {c: 0 for c in CODES}
for n, r in records:
    reasons = []
    if len(r) != 7:
        reasons = ["bad_field_count"]
    else:
        eid, name, email, dept, hired, sal, mgr = r
        id_ok = bool(re.fullmatch(r"[1-9][0-9]*", eid))
        if not id_ok:
            reasons.append("bad_id")
        elif eid in seen:
            reasons.append("duplicate_id")
        seen.add(eid)
        if not name:
            reasons.append("missing_name")
        if not EMAIL.match(email.lower()):
            reasons.append("bad_email")
        if dept.lower() not in DEPTS:
            reasons.append("bad_department")
        if not date_ok(hired):
            reasons.append("bad_hire_date")
        if not SAL.match(sal) or not (20000 <= Decimal(sal.replace(",", "")) <= 400000):
            reasons.append("bad_salary")
        if mgr and (mgr not in good_ids or mgr == eid):
            reasons.append("bad_manager")
    for c in reasons:
        counts[c] += 1
    if reasons:
        invalid.append([n, r[0] if r else "", ";".join(reasons)])
    else:
        valid.append([eid, name, email.lower(), dept.lower(), hired,
                      f"{Decimal(sal.replace(',', '')):.2f}", mgr])

with open("out/valid.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["emp_id", "full_name", "email", "department", "hire_date", "salary", "manager_id"])
    w.writerows(valid)
with open("out/invalid.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["line", "emp_id", "reasons"])
    w.writerows(invalid)
with open("out/report.json", "w") as f:
    json.dump({"total_rows": len(records), "valid": len(valid), "invalid": len(invalid),
               "reason_counts": counts}, f, indent=2)
    f.write("\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
