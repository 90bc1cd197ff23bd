#!/bin/sh
# Reference solution for datawrangle-003: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-003: HTTP status histogram from an access log.
set -e
mkdir -p out
python3 - <<'PY'
import json, re
from collections import Counter

LINE = re.compile(r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "([^"]*)" (\d{3}) (\d+|-)( .*)?$')
counts = Counter()
malformed = []
total_bytes = 0
with open("logs/access.log", encoding="utf-8", newline="\n") as f:
    for n, raw in enumerate(f, 1):
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        m = LINE.match(line)
        if not m:
            malformed.append(n)
            continue
        counts[m.group(6)] += 1
        if m.group(7) != "-":
            total_bytes += int(m.group(7))

with open("out/status_counts.csv", "w") as f:
    f.write("status,count\n")
    for st, c in sorted(counts.items(), key=lambda kv: (-kv[1], int(kv[0]))):
        f.write(f"{st},{c}\n")
by_class = Counter()
for st, c in counts.items():
    by_class[st[0] + "xx"] += c
with open("out/summary.json", "w") as f:
    json.dump({"requests": sum(counts.values()), "malformed": len(malformed),
               "bytes": total_bytes, "by_class": dict(sorted(by_class.items()))}, f, indent=2)
    f.write("\n")
with open("out/malformed_lines.txt", "w") as f:
    f.write("".join(f"{n}\n" for n in malformed))
PY
TRAJLAKE_SOLVE
sh solve.sh
