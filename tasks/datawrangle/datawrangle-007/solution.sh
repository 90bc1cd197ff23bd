#!/bin/sh
# Reference solution for datawrangle-007: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-007: collect TODO/FIXME comments into a report.
set -e
mkdir -p out
python3 - <<'PY'
import csv, json, os, re
from collections import Counter

ROOT = "project"
HASH_EXT = {".py", ".sh"}
SLASH_EXT = {".js", ".ts", ".c", ".h"}
SKIP_DIRS = {"vendor", "node_modules"}
TAG = re.compile(r"(?<![A-Za-z0-9_])(TODO|FIXME)(?![A-Za-z0-9_])")

def comment_text(line, ext):
    if ext in HASH_EXT:
        i = line.find("#")
        return None if i < 0 else line[i + 1:]
    cands = [i for i in (line.find("//"), line.find("/*")) if i >= 0]
    if cands:
        return line[min(cands) + 2:]
    s = line.lstrip()
    if s.startswith("*"):
        return s[1:]
    return None

items = []
for dirpath, dirnames, filenames in os.walk(ROOT):
    dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
    for fn in filenames:
        ext = os.path.splitext(fn)[1]
        if ext not in HASH_EXT | SLASH_EXT or fn.startswith("."):
            continue
        path = os.path.join(dirpath, fn)
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                c = comment_text(line.rstrip("\n"), ext)
                if c is None:
                    continue
                m = TAG.search(c)
                if not m:
                    continue
                rest = c[m.end():]
                owner = ""
                om = re.match(r"\(([^)]*)\)", rest)
                if om:
                    owner = om.group(1).strip()
                    rest = rest[om.end():]
                rest = rest.strip()
                if rest.startswith(":"):
                    rest = rest[1:].strip()
                if rest.endswith("*/"):
                    rest = rest[:-2].strip()
                items.append((rel, n, m.group(1), owner, rest))

items.sort(key=lambda t: (t[0].encode(), t[1]))
with open("out/todos.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["file", "line", "tag", "owner", "text"])
    w.writerows(items)
summary = {
    "total": len(items),
    "files": len({t[0] for t in items}),
    "by_tag": dict(sorted(Counter(t[2] for t in items).items())),
    "by_owner": dict(sorted(Counter(t[3] or "unassigned" for t in items).items())),
}
with open("out/todo_summary.json", "w") as f:
    json.dump(summary, f, indent=2)
    f.write("\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
