#!/bin/sh
# Reference solution for datawrangle-008: leaves the procedure in solve.sh (the judge runs it
# again on generated inputs) and runs it.
set -e
cat > solve.sh <<'TRAJLAKE_SOLVE'
#!/bin/sh
# Reference solution for datawrangle-008: sessionise clickstream with a 30-minute gap rule.
set -e
mkdir -p out
python3 - <<'PY'
import csv, datetime, json, re

UTC = datetime.timezone.utc
PAT = re.compile(r"(\d{4})-(\d{2})-(\d{2})([T ])(\d{2}):(\d{2}):(\d{2})(Z|[+-]\d{2}:\d{2})?")

def parse(v):
    m = PAT.fullmatch(v)
    if not m:
        return None
    y, mo, d, sep, h, mi, s, zone = m.groups()
    if sep == " " and zone is not None:
        return None
    if sep == "T" and zone is None:
        return None
    if zone in (None, "Z"):
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        return datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=tz).astimezone(UTC)
    except ValueError:
        return None

invalid = 0
dups = 0
seen = set()
per_user = {}
with open("data/clicks.csv", newline="", encoding="utf-8") as f:
    r = csv.reader(f)
    next(r)
    for row in r:
        if not row or all(not c.strip() for c in row):
            continue
        row = [c.strip() for c in row] + ["", "", ""]
        user, ts, page = row[0].lower(), parse(row[1]), row[2]
        if not user or ts is None:
            invalid += 1
            continue
        key = (user, ts, page)
        if key in seen:
            dups += 1
            continue
        seen.add(key)
        per_user.setdefault(user, []).append((ts, page))

fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")
rows = []
stats = {}
for user in sorted(per_user):
    evs = sorted(per_user[user])
    sessions = [[evs[0]]]
    for prev, cur in zip(evs, evs[1:]):
        if (cur[0] - prev[0]).total_seconds() > 1800:
            sessions.append([cur])
        else:
            sessions[-1].append(cur)
    durs = []
    for i, s in enumerate(sessions, 1):
        dur = int((s[-1][0] - s[0][0]).total_seconds())
        durs.append(dur)
        rows.append([user, i, fmt(s[0][0]), fmt(s[-1][0]), dur, len(s),
                     len({p for _, p in s}), s[0][1], s[-1][1]])
    stats[user] = {"sessions": len(sessions), "events": len(evs), "total_duration_s": sum(durs),
                   "longest_session_s": max(durs), "bounce_sessions": sum(1 for s in sessions if len(s) == 1)}

with open("out/sessions.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["user", "session", "start", "end", "duration_s", "events", "distinct_pages", "entry_page", "exit_page"])
    w.writerows(rows)
with open("out/user_stats.json", "w") as f:
    json.dump({"users": stats, "invalid_rows": invalid, "duplicate_events": dups}, f, indent=2, sort_keys=True)
    f.write("\n")
PY
TRAJLAKE_SOLVE
sh solve.sh
