import hashlib
import json
import re
from pathlib import Path

OUT = Path("out")

EXPECTED_CLEAN = [
    'anna_kim@mail.example.org',
    'ben.kim@example.co.uk',
    'ben.rossi@uni.example.edu',
    'ben_garcia@example.com',
    'carla+news@mail.example.org',
    'carla.rossi46@uni.example.edu',
    'dmitrichen@mail.example.org',
    'elif.novak@example.co.uk',
    'elif.silva@example.co.uk',
    'elifmuller@corp.example.net',
    'farid+news@example.com',
    'farid.silva85@example.com',
    'farid_haddad@example.com',
    'grace.novak@mail.example.org',
    'gracerossi@mail.example.org',
    'hiro.chen@corp.example.net',
    'hiro.chen@example.co.uk',
    'hirosmith@example.com',
    'hirosmith@mail.example.org',
    'ines.haddad@corp.example.net',
    'jonas+news@uni.example.edu',
    'jonas.silva@corp.example.net',
    'jonas_okafor@example.com',
    'lena.kim@example.co.uk',
    'lena.silva3@uni.example.edu',
    'lena.smith@uni.example.edu',
    'lenachen@mail.example.org',
    'lenarossi@example.co.uk',
    'marcogarcia@uni.example.edu',
    'nadia.haddad78@corp.example.net',
    'nadia.smith@uni.example.edu',
    'oskar.novak@uni.example.edu',
    'oskar_muller@mail.example.org',
    'quinn+news@example.co.uk',
    'sven_okafor@corp.example.net',
    'tariq+news@uni.example.edu',
    'tariq.rossi66@corp.example.net',
    'tariq.rossi80@example.com',
    'tariqchen@mail.example.org',
    'uma_muller@corp.example.net',
    'victor_haddad@example.com',
    'victor_silva@corp.example.net',
    'wen+news@example.com',
    'wenrossi@uni.example.edu',
    'ximena+news@example.com',
    'ximena.novak@uni.example.edu',
    'ximena_smith@example.co.uk',
    'ximenachen@mail.example.org',
    'yusuf.haddad@corp.example.net',
    'yusuf_smith@example.com',
    'yusuf_smith@mail.example.org',
    'zoe.garcia@uni.example.edu',
    'zoe.silva@corp.example.net',
    'zoe_haddad@corp.example.net',
    'zoeokafor@example.co.uk',
]

EXPECTED_REJECTED = [
    "elif@exa mple.com",
    "ines(at)example.com",
    "hiro@-",
    "<>",
    "carla@@example.com",
    "ben smith@example.com",
    "not-an-email",
    "dmitri@example",
    "anna.smith@",
    "kwame@exam_ple.com",
    "@example.com",
    "Farid Haddad <farid.haddad@example>",
    "grace.kim@example..com",
    "jonas@example.com.",
]


def _read(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    return p.read_text(encoding="utf-8")


def test_input_untouched():
    digest = hashlib.sha256(Path("data/subscribers.txt").read_bytes()).hexdigest()
    assert digest == "86c24d2a12dbb41783f13a48ab1b0bf621e562789a9c0d8ceba9c35f82000efd"


def test_clean_emails_exact():
    text = _read("clean_emails.txt")
    assert text.endswith("\n")
    lines = text.split("\n")[:-1]
    assert lines == EXPECTED_CLEAN


def test_clean_emails_properties():
    lines = _read("clean_emails.txt").splitlines()
    assert lines == sorted(lines)
    assert len(lines) == len(set(lines))
    for a in lines:
        assert a == a.strip().lower()
        assert re.fullmatch(r"[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)+", a), a
    # display-name entries must be reduced to the bare address
    assert "zoe_haddad@corp.example.net" in lines
    assert "lena.kim@example.co.uk" in lines
    assert not any("<" in a or " " in a for a in lines)


def test_rejected_exact():
    text = _read("rejected.txt")
    assert text.endswith("\n")
    assert text.split("\n")[:-1] == EXPECTED_REJECTED


def test_stats():
    stats = json.loads(_read("stats.json"))
    assert stats == {"entries": 79, "valid_unique": 55, "duplicates": 10, "rejected": 14}
