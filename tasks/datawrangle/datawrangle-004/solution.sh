#!/bin/sh
# Reference solution for datawrangle-004: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-004: normalise ship dates to ISO-8601.
set -e
mkdir -p out
python3 - <<'PY'
import datetime, re

MONTHS = ["january", "february", "march", "april", "may", "june", "july",
          "august", "september", "october", "november", "december"]
MONTH_NUM = {}
for i, m in enumerate(MONTHS, 1):
    MONTH_NUM[m] = i
    MONTH_NUM[m[:3]] = i

def parse(v):
    v = v.strip()
    m = re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", v)
    if m: y, mo, d = m.group(1), m.group(2), m.group(3)
    elif (m := re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})", v)): mo, d, y = m.groups()
    elif (m := re.fullmatch(r"(\d{1,2})\.(\d{1,2})\.(\d{4})", v)): d, mo, y = m.groups()
    elif (m := re.fullmatch(r"(\d{4})(\d{2})(\d{2})", v)): y, mo, d = m.groups()
    elif (m := re.fullmatch(r"([A-Za-z]+) (\d{1,2}),? (\d{4})", v)):
        name, d, y = m.groups()
        if name.lower() not in MONTH_NUM: return None
        mo = MONTH_NUM[name.lower()]
    elif (m := re.fullmatch(r"(\d{1,2}) ([A-Za-z]+) (\d{4})", v)):
        d, name, y = m.groups()
        if name.lower() not in MONTH_NUM: return None
        mo = MONTH_NUM[name.lower()]
    else:
        return None
    try:
        return datetime.date(int(y), int(mo), int(d)).isoformat()
    except ValueError:
        return None

with open("data/shipments.tsv", encoding="utf-8", newline="") as f:
    lines = [l.rstrip("\r\n") for l in f]
header = [h.strip() for h in lines[0].split("\t")]
col = header.index("ship_date")
out = ["\t".join(header)]
bad = ["shipment_id\toriginal_value"]
for line in lines[1:]:
    if not line.strip():
        continue
    fields = [x.strip() for x in line.split("\t")]
    iso = parse(fields[col])
    if iso is None:
        bad.append(f"{fields[0]}\t{fields[col]}")
        fields[col] = ""
    else:
        fields[col] = iso
    out.append("\t".join(fields))
with open("out/shipments_iso.tsv", "w", newline="\n") as f:
    f.write("\n".join(out) + "\n")
with open("out/unparsed.tsv", "w", newline="\n") as f:
    f.write("\n".join(bad) + "\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
