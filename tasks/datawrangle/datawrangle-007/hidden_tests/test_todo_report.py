import csv
import hashlib
import json
import os
from pathlib import Path

OUT = Path("out")

EXPECTED = [
    ('app/db/models.py', '8', 'TODO', 'maria', 'qty must never go negative'),
    ('app/db/models.py', '16', 'FIXME', '', 'connections leak when close() raises'),
    ('app/db/models.py', '17', 'TODO', '', 'FIXME: both tags on one line - the first one wins'),
    ('app/main.py', '6', 'TODO', 'maria', 'lazy import to speed up CLI start'),
    ('app/main.py', '10', 'FIXME', '', 'move colours into the settings module'),
    ('app/main.py', '14', 'TODO', '', 'validate the schema before using the config'),
    ('app/main.py', '25', 'TODO', 'dev-ops', 'no space after the hash, still counts'),
    ('app/utils.py', '7', 'FIXME', 'li.wei', 'unicode letters are dropped instead of transliterated'),
    ('app/utils.py', '17', 'TODO', '', '(maria): handle "1.234,56" style decimals'),
    ('native/fastmath.c', '5', 'TODO', 'li.wei', 'clamp pct to [0, 100]'),
    ('native/fastmath.c', '10', 'FIXME', '', 'wrong for negative values'),
    ('native/fastmath.h', '4', 'TODO', '', 'document rounding mode'),
    ('scripts/backup.py', '4', 'TODO', 'ops', 'rotate old backups'),
    ('scripts/backup.py', '5', 'TODO', 'ops', 'keep 7 daily copies, no colon'),
    ('scripts/backup.py', '11', 'FIXME', 'maria', 'check free space first'),
    ('scripts/deploy.sh', '6', 'TODO', 'ops', 'read the host list from inventory instead of hard-coding it'),
    ('scripts/deploy.sh', '7', 'FIXME', '', 'no --delete, stale files pile up'),
    ('scripts/deploy.sh', '8', 'TODO', '', ''),
    ('web/src/api.ts', '3', 'TODO', '', 'retry with exponential backoff'),
    ('web/src/api.ts', '5', 'FIXME', 'jo', 'handle 429'),
    ('web/src/index.js', '4', 'TODO', 'jo', 'read from env'),
    ('web/src/index.js', '7', 'FIXME', '', 'the spinner never hides on error'),
    ('web/src/index.js', '10', 'TODO', 'jo', 'paginate properly'),
    ('web/src/index.js', '15', 'TODO', 'sam', 'keyboard navigation'),
    ('web/src/index.js', '17', 'FIXME', 'sam', 'focus ring is invisible in dark mode'),
]


def _text(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    raw = p.read_bytes()
    assert b"\r" not in raw
    text = raw.decode("utf-8")
    assert text.endswith("\n"), f"{p} must end with a newline"
    return text


def _rows():
    text = _text("todos.csv")
    assert text.split("\n", 1)[0] == "file,line,tag,owner,text"
    return [tuple(r) for r in csv.reader(text.splitlines()[1:])]


def test_project_untouched():
    h = hashlib.sha256()
    paths = sorted(
        os.path.join(dp, f).replace(os.sep, "/") for dp, _, fns in os.walk("project") for f in fns
    )
    for p in paths:
        h.update(p.encode() + b"\0" + Path(p).read_bytes() + b"\0")
    assert h.hexdigest() == "cd9ee05edb1455681139d2d59706ee7a8ac9d65763e30740f5776885b7a54b66"


def test_locations():
    got = [(r[0], r[1]) for r in _rows()]
    assert got == [(e[0], e[1]) for e in EXPECTED]


def test_excluded_sources():
    # every scanned file is there (an empty report excludes nothing: it reports nothing)
    files = {r[0] for r in _rows()}
    assert files >= {e[0] for e in EXPECTED}
    assert not any(f.startswith(("vendor/", ".github/")) or "node_modules" in f for f in files)
    assert not any(f.endswith((".md", ".json")) for f in files)


def test_decoys_not_reported():
    locs = {(r[0], r[1]) for r in _rows()}
    # the real comments of the same files are found, so leaving the decoys out is a choice
    assert {("app/main.py", "25"), ("app/utils.py", "17"), ("web/src/index.js", "10")} <= locs
    assert ("app/main.py", "20") not in locs      # TODO only inside a string
    assert ("app/utils.py", "12") not in locs     # TODO inside a docstring
    assert ("web/src/index.js", "11") not in locs  # TODO only inside a string


def test_owner_and_text_parsing():
    got = {(r[0], r[1]): r[2:] for r in _rows()}
    assert got[("app/main.py", "25")] == ("TODO", "dev-ops", "no space after the hash, still counts")
    assert got[("app/utils.py", "17")] == ("TODO", "", '(maria): handle "1.234,56" style decimals')
    assert got[("app/db/models.py", "17")] == ("TODO", "", "FIXME: both tags on one line - the first one wins")
    assert got[("native/fastmath.c", "10")] == ("FIXME", "", "wrong for negative values")
    assert got[("web/src/index.js", "17")] == ("FIXME", "sam", "focus ring is invisible in dark mode")
    assert got[("scripts/deploy.sh", "8")] == ("TODO", "", "")


def test_full_report():
    assert _rows() == EXPECTED


def test_summary():
    summary = json.loads(_text("todo_summary.json"))
    assert summary == {
        "total": 25,
        "files": 9,
        "by_tag": {"FIXME": 9, "TODO": 16},
        "by_owner": {"dev-ops": 1, "jo": 3, "li.wei": 2, "maria": 3, "ops": 3, "sam": 2, "unassigned": 11},
    }
