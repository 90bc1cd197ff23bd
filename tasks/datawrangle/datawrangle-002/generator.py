"""Generated check of datawrangle-002: the procedure run on freshly drawn subscriber exports.

Each input set is a new ``data/subscribers.txt`` with the features the instruction's rules
name: comment lines (some indented), blank and whitespace-only lines, addresses in mixed
case padded with spaces and tabs, ``Display Name <address>`` entries (quoted names with
commas, spaces inside the angle brackets, bare ``<address>``), duplicates written in other
forms, and rejected entries of many kinds (always at least one, and at least one duplicate).
The two text files must equal the reference's byte for byte (their layout is fixed); the
JSON file must hold the same object (its layout is free, but like every output it ends with
a newline and has no carriage returns).
"""

INPUTS = ["data/subscribers.txt"]
OUTPUTS = ["out/clean_emails.txt", "out/rejected.txt", "out/stats.json"]

FIRST = [
    "anna",
    "ben",
    "carla",
    "dmitri",
    "elif",
    "farid",
    "grace",
    "hiro",
    "ines",
    "jonas",
    "kwame",
    "lena",
    "marco",
    "nadia",
    "oskar",
    "priya",
    "quinn",
    "rosa",
    "sven",
    "tariq",
    "uma",
    "victor",
    "wen",
    "ximena",
    "yusuf",
    "zoe",
]
LAST = [
    "kim",
    "rossi",
    "garcia",
    "chen",
    "novak",
    "silva",
    "muller",
    "haddad",
    "smith",
    "okafor",
    "tanaka",
    "berg",
    "eze",
]
DOMAINS = [
    "example.com",
    "example.co.uk",
    "mail.example.org",
    "corp.example.net",
    "uni.example.edu",
    "post-box.example.com",
    "mx1.example.io",
    "example.de",
]


def _local(rng, first, last):
    form = rng.randrange(7)
    if form == 0:
        return f"{first}.{last}"
    if form == 1:
        return f"{first}_{last}"
    if form == 2:
        return f"{first}{last}"
    if form == 3:
        return f"{first}+news"
    if form == 4:
        return f"{first}.{last}{rng.randint(1, 99)}"
    if form == 5:
        return f"{first}-{last}%list"
    return f"{first[0]}.{last}"


def _address(rng):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return first, last, f"{_local(rng, first, last)}@{rng.choice(DOMAINS)}"


def _case(rng, s):
    k = rng.randrange(5)
    if k == 0:
        return s.upper()
    if k == 1:
        local, _, dom = s.partition("@")
        return local + "@" + dom.upper()
    if k == 2:
        return s[:1].upper() + s[1:]
    return s


def _pad(rng, s):
    left = rng.choice(["", "", "", " ", "  ", "\t", " \t"])
    right = rng.choice(["", "", "", " ", "   ", "\t", "\t "])
    return left + s + right


def _display(rng, first, last, addr):
    """An entry naming addr in the ``Display Name <address>`` form (or a bare address)."""
    shown = _case(rng, addr)
    k = rng.randrange(8)
    if k == 0:
        return shown
    if k == 1:
        return f"{first.title()} {last.title()} <{shown}>"
    if k == 2:
        return f'"{last.title()}, {first.title()}" <{shown}>'
    if k == 3:
        return f"<{shown}>"
    if k == 4:
        return f"{first.title()} {last.title()} < {shown} >"
    if k == 5:
        return f"{first.title()}<{shown}>"
    if k == 6:
        return f"{first.title()} Jürgen-{last.title()} <{shown}>"
    return f"{first.upper()} {last.upper()}  <\t{shown}>"


def _invalid(rng):
    first, last, addr = _address(rng)
    local, _, dom = addr.partition("@")
    k = rng.randrange(16)
    if k == 0:
        return f"{local}@{dom[:3]} {dom[3:]}"
    if k == 1:
        return f"{local}(at){dom}"
    if k == 2:
        return f"{local}@@{dom}"
    if k == 3:
        return f"{local}@{dom.split('.')[0]}"
    if k == 4:
        return f"{local}@"
    if k == 5:
        return f"@{dom}"
    if k == 6:
        return f"{local}@{dom.replace('.', '..', 1)}"
    if k == 7:
        return f"{local}@{dom}."
    if k == 8:
        return f"{local}@{dom.replace('.', '_', 1)}"
    if k == 9:
        return f"{first} {last}@{dom}"
    if k == 10:
        return f"{first.title()} {last.title()} <{local}@{dom.split('.')[0]}>"
    if k == 11:
        return "<>"
    if k == 12:
        return f"{first.title()} <{addr}> (work)"
    if k == 13:
        return f"{first.title()} {last.title()} <{addr}"
    if k == 14:
        return f"{local}ü@{dom}"
    return rng.choice(["not-an-email", "n/a", "unsubscribe me", f"{addr}>", f"{local}.at.{dom}"])


COMMENTS = [
    "# newsletter signups export",
    "# one address per line",
    "#",
    "# from the web form",
    "#### batch 2 ####",
    "# duplicates below <dup@example.com>",
]


def inputs(rng):
    lines = []
    if rng.random() < 0.8:
        lines.append(rng.choice(COMMENTS))
    valid_seen = []
    n = rng.randint(35, 80)
    kinds = ["valid"] * n
    for i in rng.sample(range(n), rng.randint(2, 8)):
        kinds[i] = "invalid"
    for i in rng.sample([i for i in range(1, n) if kinds[i] == "valid"], rng.randint(2, 8)):
        kinds[i] = "dup"
    # the first valid entry comes before every duplicate
    first_valid = kinds.index("valid")
    for i in range(first_valid):
        if kinds[i] == "dup":
            kinds[i] = "valid"
    for kind in kinds:
        if kind == "invalid":
            lines.append(_pad(rng, _invalid(rng)))
        elif kind == "dup":
            first, last, addr = rng.choice(valid_seen)
            lines.append(_pad(rng, _display(rng, first, last, addr)))
        else:
            first, last, addr = _address(rng)
            valid_seen.append((first, last, addr))
            lines.append(_pad(rng, _display(rng, first, last, addr)))
        r = rng.random()
        if r < 0.06:
            lines.append(rng.choice(["", "   ", "\t", " \t "]))
        elif r < 0.1:
            lines.append(rng.choice(["", "  ", "\t"]) + rng.choice(COMMENTS))
    if rng.random() < 0.3:
        lines.append("   # end of export")
    return {"data/subscribers.txt": "\n".join(lines) + "\n"}
