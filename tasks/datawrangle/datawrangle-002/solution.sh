#!/bin/sh
# Reference solution for datawrangle-002: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-002: normalise and dedupe a subscriber list.
set -e
mkdir -p out
python3 - <<'PY'
import json, re

VALID = re.compile(r"^[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)+$")
ANGLE = re.compile(r"^(.*)<([^<>]*)>$")

entries = 0
seen = set()
dups = 0
rejected = []
with open("data/subscribers.txt", encoding="utf-8") as f:
    for raw in f:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        entries += 1
        m = ANGLE.match(line)
        addr = (m.group(2) if m else line).strip().lower()
        if not VALID.match(addr):
            rejected.append(line)
        elif addr in seen:
            dups += 1
        else:
            seen.add(addr)

with open("out/clean_emails.txt", "w") as f:
    f.write("".join(a + "\n" for a in sorted(seen)))
with open("out/rejected.txt", "w") as f:
    f.write("".join(r + "\n" for r in rejected))
with open("out/stats.json", "w") as f:
    json.dump({"entries": entries, "valid_unique": len(seen), "duplicates": dups,
               "rejected": len(rejected)}, f, indent=2)
    f.write("\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
