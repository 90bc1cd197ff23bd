"""Generated check of datawrangle-010: the procedure run on freshly drawn HR exports.

Each input set is a new ``data/employees.csv`` whose rows break every rule of the instruction,
alone or several at once: field counts other than 7 (short rows, an extra field, an unquoted
comma in a name or a salary, a lone word), ids that are not ``^[1-9][0-9]*$`` (``0``, leading
zeros, letters, empty), repeated ids, empty or blank names, malformed e-mail addresses, unknown
departments, hire dates of other layouts, impossible or after the cut-off, salaries with
wrong separators or decimals, signs or units, or out of range, and managers that are the row
itself, unknown, a bad id or the id of a short row. Valid rows sit on the boundaries
(salaries ``20000`` and ``400,000``, hire date ``2024-06-30``, a manager listed later, a
manager whose own row is invalid), with padded fields, mixed-case e-mails and departments,
quoted names with commas and doubled quotes, and blank and whitespace-only lines in between
(they still count for line numbers). The two CSV files have a fixed layout and must equal the
reference's byte for byte; the JSON report must hold the same object (its layout is not fixed).
"""

import datetime

INPUTS = ["data/employees.csv"]
OUTPUTS = ["out/valid.csv", "out/invalid.csv", "out/report.json"]

FIRST = [
    "Wale",
    "Uma",
    "Isla",
    "Amara",
    "Femi",
    "Mina",
    "Jamal",
    "Elena",
    "Tariq",
    "Nils",
    "Liam",
    "Vera",
    "Bruno",
    "Rania",
    "Pedro",
    "Hugo",
    "Zeno",
    "Sina",
    "Olga",
    "Xu",
    "Keiko",
    "Dev",
    "Greta",
    "Zoë",
]
LAST = [
    "Eriksen",
    "Bauer",
    "Dubois",
    "Hansen",
    "Nowak",
    "Jensen",
    "Lopez",
    "Okoro",
    "Ivanov",
    "Fischer",
    "Moreau",
    "Gupta",
    "Costa",
    "Khan",
    "Adeyemi",
]
DEPTS = ["engineering", "sales", "marketing", "finance", "hr", "support"]
CUTOFF = datetime.date(2024, 6, 30)


def _q(s):
    return '"' + s.replace('"', '""') + '"'


def _pad(rng, s):
    r = rng.random()
    if r < 0.12:
        return rng.choice([" ", "  "]) + s
    if r < 0.22:
        return s + rng.choice([" ", "  "])
    return s


def _salary_text(rng, cents):
    whole, frac = divmod(cents, 100)
    text = f"{whole:,}" if rng.random() < 0.35 else str(whole)
    k = rng.random()
    if k < 0.2:
        text += f".{frac:02d}"
    elif k < 0.3:
        text += f".{frac // 10}"
    return text


def _good(rng, eid):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    plain = first.replace("ë", "e")
    dept = rng.choice(DEPTS)
    day = datetime.date(2015, 1, 1) + datetime.timedelta(
        days=rng.randrange((CUTOFF - datetime.date(2015, 1, 1)).days + 1)
    )
    return {
        "id": str(eid),
        "name": rng.choice([f"{first} {last}", f"{first} {last}", f"{last}, {first}"]),
        "email": rng.choice(
            [
                f"{plain}.{last}@example.com",
                f"{plain}.{last}@example.com".upper(),
                f"{plain[0]}{last}@corp.example.co.uk".lower(),
            ]
        ),
        "dept": rng.choice([dept, dept.upper(), dept.title(), dept.title() + " "]),
        "date": day.isoformat(),
        "salary": _salary_text(rng, rng.randint(20000 * 4, 400000 * 4) * 25),
        "mgr": "",
    }


BAD = {
    "bad_id": ["0", "abc", "", "-5", "12a", "+1003", "1 2", "1.0"],
    "missing_name": ["", "   "],
    "bad_email": [
        "no-at-sign",
        "{f}@example",
        "{f}@@example.com",
        "{f}@example..com",
        "{f} x@example.com",
        "{f}@exa_mple.com",
        "{f}@example.com.",
        "@example.com",
        "{f}é@example.com",
        "",
    ],
    "bad_department": ["Legal", "", "Eng", "engineering dept", "R&D", "human resources", "sale"],
    "bad_hire_date": [
        "2024-07-01",
        "2024-02-30",
        "24/03/2023",
        "2023-1-05",
        "2023-13-01",
        "",
        "2025-01-01",
        "2023/01/05",
        "2023-02-29",
        "20230105",
        "2022-04-31",
    ],
    "bad_salary": [
        "15000",
        "19999.99",
        "400000.01",
        "400,000.50",
        "12k",
        "1,00,000",
        "1,2345",
        "-5",
        "$50000",
        "50000.123",
        ".5",
        "50000.",
        "50 000",
        "",
        "1,234,567",
        "50,000,",
        "0",
        "9,999.99",
    ],
}
GOOD_EDGES = {
    "salary": ["20000", "20,000", "400,000", "400000.00", "20000.0", "399,999.99", "100250.5"],
    "date": ["2024-06-30", "2024-02-29", "2015-01-01"],
}


def inputs(rng):
    n = rng.randint(40, 90)
    eid = rng.randint(100, 5000)
    rows = []
    for _ in range(n):
        eid += rng.randint(1, 4)
        rows.append(_good(rng, eid))
    ids = [r["id"] for r in rows]
    # managers: mostly none or another row (earlier or later)
    for r in rows:
        if rng.random() < 0.45:
            r["mgr"] = rng.choice([i for i in ids if i != r["id"]])
    for r in rng.sample(rows, rng.randint(1, 4)):
        for key, vals in GOOD_EDGES.items():
            if rng.random() < 0.5:
                r[key] = rng.choice(vals)
    # broken rows: one to three reasons each
    shape = {}
    for i in rng.sample(range(n), rng.randint(n // 6, n // 3)):
        r = rows[i]
        f = r["email"].split("@")[0]
        for reason in rng.sample(
            [
                "bad_id",
                "duplicate_id",
                "missing_name",
                "bad_email",
                "bad_department",
                "bad_hire_date",
                "bad_salary",
                "bad_manager",
                "bad_field_count",
            ],
            rng.choice([1, 1, 1, 2, 3]),
        ):
            if reason == "duplicate_id" and i > 0:
                r["id"] = rng.choice(ids[:i])
            elif reason == "bad_manager":
                r["mgr"] = rng.choice([r["id"], "9999999", "0" + rng.choice(ids), "abc", "-1"])
            elif reason == "bad_field_count":
                shape[i] = rng.choice(["short", "extra", "name_comma", "salary_comma", "word", "no_mgr"])
            elif reason == "bad_email":
                r["email"] = rng.choice(BAD[reason]).format(f=f)
            elif reason == "bad_department":
                r["dept"] = rng.choice(BAD[reason])
            elif reason == "bad_hire_date":
                r["date"] = rng.choice(BAD[reason])
            elif reason == "bad_salary":
                r["salary"] = rng.choice(BAD[reason])
            elif reason == "bad_id":
                r["id"] = rng.choice(BAD[reason] + ["0" + r["id"]])
            elif reason == "missing_name":
                r["name"] = rng.choice(BAD[reason])
    # a manager pointing at a short row's id or at a bad id is bad; at an otherwise invalid row, fine
    if rng.random() < 0.6:  # a row managing itself
        r = rng.choice(rows)
        r["mgr"] = r["id"]
    short_ids = [rows[i]["id"] for i in shape if shape[i] != "word"]
    if short_ids and rng.random() < 0.7:
        rng.choice(rows)["mgr"] = rng.choice(short_ids)

    lines = ["emp_id,full_name,email,department,hire_date,salary,manager_id"]
    for i, r in enumerate(rows):
        name = r["name"]
        name_f = (
            _q(_pad(rng, name)) if ("," in name or '"' in name or rng.random() < 0.1) else _pad(rng, name)
        )
        salary_f = _q(r["salary"]) if "," in r["salary"] else _pad(rng, r["salary"])
        fields = [
            _pad(rng, r["id"]),
            name_f,
            _pad(rng, r["email"]),
            r["dept"] if r["dept"].endswith(" ") else _pad(rng, r["dept"]),
            _pad(rng, r["date"]),
            salary_f,
            _pad(rng, r["mgr"]),
        ]
        kind = shape.get(i)
        if kind == "short":
            fields = fields[: rng.randint(2, 5)]
        elif kind == "extra":
            fields.append(rng.choice(["extra", "", "note, quoted"]) if rng.random() < 0.7 else "x")
            if fields[-1] == "note, quoted":
                fields[-1] = _q(fields[-1])
        elif kind == "name_comma":
            fields[1] = rng.choice(LAST) + ", " + rng.choice(FIRST)
        elif kind == "salary_comma":
            fields[5] = "94,000"
        elif kind == "word":
            fields = [rng.choice(["garbage line", "TOTAL", "-- end of page --"])]
        elif kind == "no_mgr":
            fields = fields[:6]
        lines.append(",".join(fields))
        if rng.random() < 0.06:
            lines.append(rng.choice(["", "", "   ", "\t"]))
    return {"data/employees.csv": "\n".join(lines) + "\n"}
