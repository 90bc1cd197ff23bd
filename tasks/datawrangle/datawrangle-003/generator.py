"""Generated check of datawrangle-003: the procedure run on freshly drawn access logs.

Each input set is a new ``logs/access.log`` in Combined (sometimes Common) Log Format with
blank and whitespace-only lines and broken lines of many kinds (a status that is not three
digits, a line cut short by the crash, missing brackets or quotes, a stray quote inside the
request, tabs for spaces, a leading space, garbage), always at least two of them; sizes are
sometimes ``-`` and the last line sometimes has no newline. The CSV and the list of line
numbers must equal the reference's byte for byte (their layout is fixed); the JSON file
must hold the same object (its layout is free, but like every text file it ends with a
newline and has no carriage returns).
"""

INPUTS = ["logs/access.log"]
OUTPUTS = ["out/status_counts.csv", "out/summary.json", "out/malformed_lines.txt"]

IPS = [
    "198.51.100.7",
    "198.51.100.120",
    "203.0.113.4",
    "203.0.113.17",
    "203.0.113.42",
    "192.0.2.1",
    "10.0.0.12",
    "2001:db8::1f",
    "2001:db8:85a3::8a2e:370:7334",
]
USERS = ["-", "-", "-", "-", "alice", "bob", "svc-backup"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
METHODS = ["GET", "GET", "GET", "GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"]
PATHS = [
    "/",
    "/index.html",
    "/search?q=red+shoes",
    "/api/v1/items?page=2",
    "/static/site.css",
    "/static/app.js",
    "/login",
    "/cart",
    "/checkout",
    "/img/logo.png",
    "/robots.txt",
    "/admin/../etc/passwd",
    "/wp-login.php",
    "/api/v1/orders/1234",
    "/favicon.ico",
]
STATUSES = [200] * 30 + [
    201,
    204,
    206,
    301,
    302,
    302,
    304,
    304,
    304,
    400,
    401,
    403,
    404,
    404,
    404,
    404,
    405,
    418,
    429,
    500,
    500,
    502,
    503,
    504,
    100,
    101,
    207,
    599,
]
REFERERS = ["-", "-", "https://www.google.com/", "https://shop.example.com/", "https://shop.example.com/cart"]
AGENTS = [
    "curl/8.5.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)",
    "Googlebot/2.1 (+http://www.google.com/bot.html)",
    "python-requests/2.31.0",
    "-",
]


def _request(rng):
    if rng.random() < 0.03:
        return rng.choice(["", "-", "\\x16\\x03\\x01"])
    proto = rng.choice(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0"])
    return f"{rng.choice(METHODS)} {rng.choice(PATHS)} {proto}"


def _parts(rng, day, statuses):
    ip = rng.choice(IPS)
    user = rng.choice(USERS)
    month = rng.choice(MONTHS)
    hh, mm, ss = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    when = f"{day:02d}/{month}/2024:{hh:02d}:{mm:02d}:{ss:02d}"
    zone = rng.choice(["+0000", "+0000", "+0000", "+0200", "-0500"])
    status = str(rng.choice(statuses))
    size = (
        "-"
        if rng.random() < 0.12
        else str(rng.choice([rng.randint(0, 999), rng.randint(1000, 60000), rng.randint(60000, 5_000_000)]))
    )
    return ip, user, f"{when} {zone}", _request(rng), status, size


def _line(ip, user, when, req, status, size, tail):
    return f'{ip} - {user} [{when}] "{req}" {status} {size}{tail}'


def _tail(rng):
    r = rng.random()
    if r < 0.12:
        return ""  # Common Log Format: nothing after the size
    if r < 0.15:
        return " "
    return f' "{rng.choice(REFERERS)}" "{rng.choice(AGENTS)}"'


def _malformed(rng, parts):
    ip, user, when, req, status, size = parts
    k = rng.randrange(11)
    if k == 0:
        return _line(
            ip, user, when, req, status.replace("0", "O", 1) if "0" in status else "2OO", size, _tail(rng)
        )
    if k == 1:
        return _line(ip, user, when, req, rng.choice(["1000", "20", "2000", "-"]), size, _tail(rng))
    if k == 2:  # the writer crashed after the status
        return _line(ip, user, when, req, status, "", "").rstrip()
    if k == 3:  # cut inside the request
        full = _line(ip, user, when, req or "GET / HTTP/1.1", status, size, "")
        return full[: full.index('"') + rng.randint(2, 6)]
    if k == 4:
        return f'{ip} - {user} {when} "{req}" {status} {size}{_tail(rng)}'
    if k == 5:
        return f"{ip} - {user} [{when}] {req or 'GET /'} {status} {size}{_tail(rng)}"
    if k == 6:
        return _line(ip, user, when, 'GET /a"b HTTP/1.1', status, size, _tail(rng))
    if k == 7:
        return f'{ip}\t-\t{user}\t[{when}]\t"{req}"\t{status}\t{size}'
    if k == 8:
        return " " + _line(ip, user, when, req, status, size, _tail(rng))
    if k == 9:
        return _line(ip, user, when, req, status, rng.choice(["12k", "1.5", "n/a"]), _tail(rng))
    return rng.choice(
        [
            "garbage line from a crashed writer",
            "\\x16\\x03\\x01\\x02\\x00\\x01\\x00\\x01\\xfc",
            "-- log rotated --",
            '"GET / HTTP/1.1" 200 512',
            "[03/Jun/2024:08:15:00 +0000]",
        ]
    )


def inputs(rng):
    statuses = rng.sample(sorted(set(STATUSES)), rng.randint(6, 14))
    weighted = [s for s in STATUSES if s in statuses] + statuses
    day = rng.randint(1, 28)
    n = rng.randint(60, 160)
    bad = set(rng.sample(range(n), rng.randint(2, 9)))
    lines = []
    for i in range(n):
        parts = _parts(rng, day, weighted)
        if i in bad:
            lines.append(_malformed(rng, parts))
        else:
            lines.append(_line(*parts, _tail(rng)))
        if rng.random() < 0.05:
            lines.append(rng.choice(["", "", "   ", "\t", " \t "]))
    text = "\n".join(lines)
    if rng.random() < 0.85:
        text += "\n"
    return {"logs/access.log": text}
