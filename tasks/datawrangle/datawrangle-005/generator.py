"""Generated check of datawrangle-005: the procedure run on freshly drawn customer and order exports.

Each input set is a new pair ``data/customers.csv`` / ``data/orders.csv`` in the instruction's
format: quoted names with commas and doubled quotes, names and countries with padding (inside
the quotes where a field is quoted) and in mixed case, non-ASCII names, blank and
whitespace-only lines, customer ids in other cases and padded, repeated customer ids (the
first row counts), orders of unknown or empty customers (always at least one), customers
without orders, equal totals, amounts with 0, 1 or 2 decimals, and order ids of different
lengths (so their order is numeric, not textual). All three outputs have a fixed layout: each
must equal the reference's byte for byte.
"""

import datetime

INPUTS = ["data/customers.csv", "data/orders.csv"]
OUTPUTS = ["out/order_details.csv", "out/orphan_orders.csv", "out/customer_totals.csv"]

FIRST = [
    "Jane",
    "Ola",
    "Ana Lúcia",
    "Hana",
    "Mateo",
    "Fatima",
    "Zhang",
    "Riley",
    "Luca",
    "Priya",
    "Jordan",
    "Pat",
    "Siobhan",
    "Yuki",
    "Lars",
    "Chidi",
    "Ingrid",
    "Tomás",
    "Noor",
    "Alex",
    "Kim",
    "Li",
    "Sam",
    "Emeka",
    "Sofia",
    "Casey",
    "Björn",
    "Zoë",
]
LAST = [
    "Smith",
    "Nordmann",
    "Costa",
    "Novak",
    "Silva",
    "Al-Sayed",
    "Ling",
    "Chen",
    "Bianchi",
    "Natarajan",
    "Lee",
    "Kowalski",
    "O'Brien",
    "Tanaka",
    "Petersen",
    "Eze",
    "Berg",
    "García",
    "Haddad",
    "Morgan",
    "Wei",
    "Taylor",
    "Obi",
    "Rossi",
    "Brown",
    "Müller",
]
COMPANIES = [
    "Dupont SARL",
    "Nordic Supplies AB",
    "Okafor & Sons Ltd",
    "Rossi & Figli, S.r.l.",
    "Acme, Inc.",
    'Bob "The Builder" Jones',
    "Müller GmbH",
    'The "Corner" Shop, Ltd',
    "Kim & Park Co.",
]
COUNTRIES = ["GB", "NL", "NG", "BR", "FR", "DE", "SE", "US", "JP", "IT", "PL", "KE"]


def _quote(s):
    return '"' + s.replace('"', '""') + '"'


def _name_field(rng, name):
    """The name as a CSV field: quoted where needed (padding inside the quotes), else maybe padded."""
    pad = rng.choice(["", "", "", " ", "  "])
    if "," in name or '"' in name or rng.random() < 0.1:
        return _quote(rng.choice([name + pad, pad + name]))
    return rng.choice([name + pad, pad + name])


def _id_field(rng, cid):
    shown = cid.lower() if rng.random() < 0.2 else cid
    k = rng.random()
    if k < 0.2:
        return rng.choice([" ", "  "]) + shown + rng.choice(["", " "])
    if k < 0.25:
        return _quote(" " + shown)
    return shown


def _blank(rng):
    return rng.choice(["", "", "   ", "\t", " \t"])


def _date(rng, year):
    return (datetime.date(year, 1, 1) + datetime.timedelta(days=rng.randrange(365))).isoformat()


def _amount(rng):
    v = rng.choice([rng.randint(100, 9999), rng.randint(1000, 99999)])
    text = f"{v // 100}.{v % 100:02d}"
    k = rng.random()
    if k < 0.2:
        text = text.rstrip("0").rstrip(".")
    elif k < 0.3:
        text = str(v // 100)
    return text


def inputs(rng):
    nc = rng.randint(12, 40)
    ids = [f"C{i:04d}" for i in rng.sample(range(1, 400), nc)]
    names = {}
    lines = ["customer_id,name,country,signup_date"]
    for cid in ids:
        if rng.random() < 0.2:
            name = rng.choice(COMPANIES)
        elif rng.random() < 0.15:
            name = f"{rng.choice(LAST)}, {rng.choice(FIRST)}"
        else:
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        names[cid] = name
        country = rng.choice(COUNTRIES)
        country = rng.choice([country, country.lower(), " " + country.lower(), country + " "])
        lines.append(",".join([_id_field(rng, cid), _name_field(rng, name), country, _date(rng, 2023)]))
        if rng.random() < 0.08:
            lines.append(_blank(rng))
    # later rows repeating a customer id (in another case, padded) are ignored
    for cid in rng.sample(ids, rng.randint(0, 3)):
        lines.append(
            ",".join(
                [
                    rng.choice([cid.lower(), " " + cid, cid]),
                    _name_field(rng, "DUPLICATE ENTRY - ignore"),
                    rng.choice(["XX", "zz"]),
                    "2024-01-01",
                ]
            )
        )
    customers = "\n".join(lines) + "\n"

    no = rng.randint(30, 120)
    oids = rng.sample(range(1, 2000), no)
    active = rng.sample(ids, max(1, len(ids) - rng.randint(1, 4)))  # some customers get no orders
    orphan_at = set(rng.sample(range(no), rng.randint(1, 6)))
    rows = []
    for i, oid in enumerate(oids):
        if i in orphan_at:
            cid = rng.choice(
                [
                    "C9999",
                    "X" + rng.choice(ids)[1:],
                    rng.choice(ids)[:-1],
                    "",
                    "  ",
                    "C0000",
                    rng.choice(ids) + "0",
                ]
            )
            cid_field = cid
        else:
            cid_field = _id_field(rng, rng.choice(active))
        amount = _amount(rng)
        if rng.random() < 0.15:
            amount = rng.choice([" ", ""]) + amount + rng.choice([" ", ""])
        oid_field = str(oid)
        if rng.random() < 0.1:
            oid_field = rng.choice([" " + oid_field, oid_field + " ", _quote(oid_field)])
        rows.append(",".join([oid_field, cid_field, _date(rng, 2024), amount]))
    idle = [c for c in ids if c not in active]
    if len(idle) >= 2 and rng.random() < 0.5:  # two customers with equal totals
        a, b = rng.sample(idle, 2)
        amount = _amount(rng)
        extra = rng.sample(range(2000, 9999), 2)
        rows.append(",".join([str(extra[0]), a, _date(rng, 2024), amount]))
        rows.append(",".join([str(extra[1]), b.lower(), _date(rng, 2024), amount]))
    rng.shuffle(rows)
    out = ["order_id,customer_id,order_date,amount"]
    for r in rows:
        out.append(r)
        if rng.random() < 0.05:
            out.append(_blank(rng))
    return {"data/customers.csv": customers, "data/orders.csv": "\n".join(out) + "\n"}
