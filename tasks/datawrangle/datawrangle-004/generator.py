"""Generated check of datawrangle-004: the procedure run on freshly drawn shipment exports.

Each input set is a new ``data/shipments.tsv`` in the instruction's format: its six accepted
date formats (1- and 2-digit days and months, month names full or abbreviated in any case,
with and without the comma, US order against day-first order for days up to 12, leap days),
stray spaces around fields, CRLF line ends on some lines, blank and whitespace-only lines, and
unparseable dates of many kinds (non-existent dates in every format, times, 2-digit years,
misspelled or ``Sept``-style month names, other separators, empty values, words), always at
least one of them. Both outputs have a fixed layout: each must equal the reference's byte
for byte.
"""

import datetime

INPUTS = ["data/shipments.tsv"]
OUTPUTS = ["out/shipments_iso.tsv", "out/unparsed.tsv"]

CARRIERS = ["DHL", "UPS", "FedEx", "PostNL", "La Poste", "Royal Mail", "GLS", "DPD"]
DESTS = [
    "Gdansk",
    "Leeds",
    "Lyon",
    "Porto",
    "Rotterdam",
    "Kyoto",
    "Berlin",
    "Austin",
    "New York",
    "Sao Paulo",
    "Cape Town",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _num(rng, v):
    return f"{v:02d}" if v < 10 and rng.random() < 0.5 else str(v)


def _name(rng, month):
    name = MONTHS[month - 1]
    if rng.random() < 0.6:
        name = name[:3]
    return rng.choice([name, name.lower(), name.upper(), name])


def _fmt(rng, y, m, d):
    """A date (possibly one that does not exist) written in one of the six accepted formats."""
    k = rng.randrange(6) if 1 <= m <= 12 else rng.randrange(4)
    if k == 0:
        return f"{y}-{_num(rng, m)}-{_num(rng, d)}"
    if k == 1:
        return f"{_num(rng, m)}/{_num(rng, d)}/{y}"
    if k == 2:
        return f"{_num(rng, d)}.{_num(rng, m)}.{y}"
    if k == 3:
        return f"{y}{m:02d}{d:02d}"
    if k == 4:
        return f"{_name(rng, m)} {_num(rng, d)}{rng.choice([',', ''])} {y}"
    return f"{_num(rng, d)} {_name(rng, m)} {y}"


def _good_date(rng):
    if rng.random() < 0.08:
        return datetime.date(2024, 2, 29)
    start = datetime.date(2022, 1, 1)
    d = start + datetime.timedelta(days=rng.randrange(4 * 365))
    if rng.random() < 0.4 and d.day > 12:  # a day <= 12: month-first and day-first orders differ
        d = d.replace(day=rng.randint(1, 12))
    return d


def _bad_date(rng):
    k = rng.randrange(9)
    if k <= 2:  # a date that does not exist, in an accepted format
        y, m, d = rng.choice(
            [
                (2023, 2, 29),
                (2023, 2, 30),
                (2024, 2, 30),
                (2023, 4, 31),
                (2024, 6, 31),
                (2023, 13, 1),
                (2024, 0, 10),
                (2023, 5, 0),
                (2023, 12, 32),
                (2024, 9, 31),
            ]
        )
        return _fmt(rng, y, m, d)
    g = _good_date(rng)
    if k == 3:
        return rng.choice([f"{g.isoformat()}T10:00", f"{g.isoformat()} 08:30", f"{g.isoformat()}T00:00:00Z"])
    if k == 4:
        return rng.choice(
            [
                f"{g.month}/{g.day}/{g.year % 100:02d}",
                f"{g.day}.{g.month}.{g.year % 100:02d}",
                f"{g.year % 100:02d}-{g.month:02d}-{g.day:02d}",
            ]
        )
    if k == 5:
        bad = {
            "January": "Janury",
            "February": "Febuary",
            "March": "Mrch",
            "April": "Apirl",
            "May": "Mai",
            "June": "Juen",
            "July": "Jly",
            "August": "Agust",
            "September": "Sept",
            "October": "Octobre",
            "November": "Novembre",
            "December": "Decmber",
        }[MONTHS[g.month - 1]]
        return rng.choice([f"{bad} {g.day}, {g.year}", f"{g.day} {bad} {g.year}"])
    if k == 6:
        return rng.choice(
            [
                f"{g.year}/{g.month:02d}/{g.day:02d}",
                f"{g.day:02d}-{g.month:02d}-{g.year}",
                f"{g.year}{g.month:02d}{g.day}"[:7],
                f"{g.year}-{g.month:03d}-{g.day:02d}",
                f"{g.year}.{g.month}.{g.day}",
            ]
        )
    if k == 7:
        return ""
    return rng.choice(["TBD", "n/a", "unknown", "?", "-", "pending"])


def _pad(rng, s):
    if rng.random() < 0.75:
        return s
    return rng.choice(["", " ", "  "]) + s + rng.choice(["", " ", "  "])


def inputs(rng):
    n = rng.randint(30, 90)
    ids = rng.sample(range(100, 1000), n)
    bad = set(rng.sample(range(n), rng.randint(1, max(2, n // 6))))
    crlf = rng.random() < 0.7
    lines = [
        "shipment_id\tcarrier\tship_date\tweight_kg\tdestination"
        + ("\r" if crlf and rng.random() < 0.3 else "")
    ]
    for i in range(n):
        if i in bad:
            date = _bad_date(rng)
        else:
            g = _good_date(rng)
            date = _fmt(rng, g.year, g.month, g.day)
        weight = f"{rng.uniform(0.1, 30):.2f}"
        if rng.random() < 0.1:
            weight = weight.rstrip("0")
        fields = [f"SH{ids[i]:05d}", rng.choice(CARRIERS), date, weight, rng.choice(DESTS)]
        line = "\t".join(_pad(rng, f) for f in fields)
        if crlf and rng.random() < 0.25:
            line += "\r"
        lines.append(line)
        r = rng.random()
        if r < 0.05:
            lines.append(rng.choice(["", "   ", "\r", "\t\t\t\t", " \t "]))
    text = "\n".join(lines)
    if rng.random() < 0.9:
        text += "\n"
    return {"data/shipments.tsv": text}
