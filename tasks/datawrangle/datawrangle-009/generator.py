"""Generated check of datawrangle-009: the procedure run on freshly drawn photo folders and plans.

Each input set is a new ``photos/`` tree and ``rename_map.csv`` whose rows take every status
the instruction defines: plain renames into new directories, swaps, chains and 3-cycles
(applied as if simultaneously), rows blocked by a file that stays (a file no row moves, the
``old`` of a conflicting or blocked row: blocking cascades) or by an existing directory,
conflicts on the same ``old`` or the same ``new`` (and an ``old`` repeated by an invalid row,
which is no conflict), missing files (also a directory named as ``old``), unchanged rows, and
invalid rows (empty fields or a missing ``new``, ``..``, ``.``, empty components, absolute
paths); with comments, blank lines, padded fields and quoted names with commas. Every set
renames at least one file. The final ``photos/`` tree must hold the same files with the same
bytes as the reference's, the manifest (fixed layout) must equal it byte for byte, and the
summary must hold the same object (its layout is not fixed).

Paths are drawn so that the plan never asks for something the instruction leaves open:
directory names have no dot and file names have one (so no new path runs through a file),
and an invalid ``old`` never names a file of ``photos/`` by another spelling.
"""

INPUTS = ["photos/", "rename_map.csv"]
OUTPUTS = ["photos/", "out/manifest.csv", "out/summary.json"]

SUBDIRS = ["raw", "2024", "card2", "raw/burst"]
NEW_DIRS = ["2024/06", "2024/07", "archive", "edits/best", "trip", "2024", ""]


def _content(rng, name):
    kind = rng.choice(["JPEG", "PNG", "text"])
    return f"{kind} data of {name}: {rng.getrandbits(64):016x}\n" * rng.randint(1, 3)


def _field(rng, path):
    if "," in path or '"' in path:
        return '"' + rng.choice(["", " "]) + path.replace('"', '""') + '"'
    r = rng.random()
    if r < 0.15:
        return rng.choice([" ", "  ", "\t"]) + path + rng.choice(["", " "])
    if r < 0.2:
        return path + rng.choice([" ", "  "])
    if r < 0.25:
        return '"' + path + '"'
    return path


def inputs(rng):
    files = {}
    names = []
    num = rng.randint(1, 8000)
    for _ in range(rng.randint(14, 26)):
        num += rng.randint(1, 9)
        r = rng.random()
        if r < 0.6:
            name = f"IMG_{num:04d}." + rng.choice(["jpg", "jpg", "JPG", "png"])
        elif r < 0.75:
            name = f"DSC_{num:04d}.jpg"
        else:
            name = rng.choice(
                [
                    "scan 01.png",
                    "scan, page 2.png",
                    "a.txt",
                    "b.txt",
                    "notes.txt",
                    "cover.png",
                    ".DS_Store.bak",
                    "IMG copy.jpg",
                    "c.txt",
                ]
            )
        if rng.random() < 0.25:
            name = f"{rng.choice(SUBDIRS)}/{name}"
        if name not in files:
            files[name] = _content(rng, name)
            names.append(name)
    dirs = sorted({"/".join(p.split("/")[:k]) for p in names for k in range(1, p.count("/") + 1)})
    if not dirs:
        extra = f"raw/IMG_{num + 1:04d}.jpg"
        files[extra] = _content(rng, extra)
        names.append(extra)
        dirs = ["raw"]

    pool = names[:]
    rng.shuffle(pool)
    stayers = [pool.pop() for _ in range(2)]  # files no row moves
    used_new = set()

    def take():
        return pool.pop() if pool else None

    def fresh():
        while True:
            d = rng.choice(NEW_DIRS)
            stem = rng.choice(
                ["beach", "hike", "dinner", "sunset", "scan, page", "portrait", "IMG", "best of"]
            )
            p = f"{stem}_{rng.randint(1, 99):02d}." + rng.choice(["jpg", "png"])
            p = f"{d}/{p}" if d else p
            if p not in files and p not in used_new:
                used_new.add(p)
                return p

    groups = []  # each a list of (old, new) rows kept together or shuffled

    def add(*rows):
        groups.append(list(rows))

    for _ in range(rng.randint(2, 5)):  # plain renames
        old = take()
        if old:
            add((old, fresh()))
    blocked_olds = []
    conflict_olds = []
    plan = [
        "swap",
        "chain",
        "cycle",
        "blocked",
        "blocked",
        "cascade",
        "dirblock",
        "conflict_new",
        "conflict_old",
        "invalid_then_valid",
        "missing",
        "missing_dir",
        "unchanged",
        "invalid",
        "invalid",
        "invalid_old",
        "same_row_twice",
    ]
    kinds = rng.sample(plan, rng.randint(7, len(plan)))
    # blocking rows need their blockers first
    kinds.sort(key=lambda k: {"conflict_new": 0, "conflict_old": 0, "blocked": 1, "cascade": 2}.get(k, 3))
    for kind in kinds:
        if kind == "swap" and len(pool) >= 2:
            a, b = take(), take()
            add((a, b), (b, a))
        elif kind == "chain" and len(pool) >= 2:
            a, b = take(), take()
            add((a, b), (b, fresh()))
        elif kind == "cycle" and len(pool) >= 3:
            a, b, c = take(), take(), take()
            add((a, b), (b, c), (c, a))
        elif kind == "blocked" and pool:
            old = take()
            add((old, rng.choice(stayers + conflict_olds)))
            blocked_olds.append(old)
        elif kind == "cascade" and pool and blocked_olds:
            old = take()
            add((old, rng.choice(blocked_olds)))
            blocked_olds.append(old)
        elif kind == "dirblock" and pool:
            add((take(), rng.choice(dirs)))
        elif kind == "conflict_new" and len(pool) >= 2:
            a, b, new = take(), take(), fresh()
            add((a, new), (b, new))
            conflict_olds += [a, b]
        elif kind == "conflict_old" and pool:
            a = take()
            add((a, fresh()), (a, fresh()))
            conflict_olds.append(a)
        elif kind == "invalid_then_valid" and pool:
            a = take()
            add(
                (a, rng.choice(["../" + a.rsplit("/", 1)[-1], "/tmp/" + a.rsplit("/", 1)[-1], ""])),
                (a, fresh()),
            )
        elif kind == "missing":
            add((f"IMG_{rng.randint(9000, 9999)}.jpg", fresh()))
        elif kind == "missing_dir":
            add((rng.choice(dirs), "archive/" + rng.choice(dirs).replace("/", "_")))
        elif kind == "unchanged" and pool:
            a = take()
            add((a, a))
        elif kind == "invalid":
            a = take() or rng.choice(stayers)
            add(
                (
                    a,
                    rng.choice(
                        [
                            "",
                            "../escape.jpg",
                            "/tmp/abs.jpg",
                            "2024//x.jpg",
                            "./x.jpg",
                            "archive/",
                            "2024/../x.jpg",
                            "archive/./y.jpg",
                            "..",
                        ]
                    ),
                )
            )
        elif kind == "invalid_old":
            add((rng.choice(["", "../rename_map.csv", "/tmp/x.jpg", "..", "raw/../../x.jpg"]), fresh()))
        elif kind == "same_row_twice" and pool:
            a, new = take(), fresh()
            add((a, new), (a, new))
    rng.shuffle(groups)

    lines = ["old,new"]
    if rng.random() < 0.6:
        lines.append(rng.choice(["# June 2024 batch", "# generated by the cataloguing tool"]))
    for group in groups:
        for old, new in group:
            if new == "" and rng.random() < 0.5:
                lines.append(_field(rng, old) if old else "")  # no new field at all
                if not old:
                    lines[-1] = ","
            else:
                lines.append(_field(rng, old) + "," + _field(rng, new))
            r = rng.random()
            if r < 0.06:
                lines.append(rng.choice(["", "   ", "\t"]))
            elif r < 0.1:
                lines.append(rng.choice(["# swap the two captions", "  # keep the originals", "#,x.jpg"]))
    return {**{f"photos/{p}": d for p, d in files.items()}, "rename_map.csv": "\n".join(lines) + "\n"}
