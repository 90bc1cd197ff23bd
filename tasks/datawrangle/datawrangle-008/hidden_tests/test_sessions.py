import csv
import hashlib
import json
from pathlib import Path

OUT = Path("out")
HEADER = "user,session,start,end,duration_s,events,distinct_pages,entry_page,exit_page"

EXPECTED_SESSIONS = [
    ('alice', '1', '2024-04-02T10:09:33Z', '2024-04-02T10:23:47Z', '854', '2', '2', '/account', '/checkout'),
    ('alice', '2', '2024-04-02T14:18:56Z', '2024-04-02T14:29:58Z', '662', '3', '2', '/help', '/help'),
    ('alice', '3', '2024-04-02T17:53:27Z', '2024-04-02T18:40:04Z', '2797', '6', '4', '/', '/account'),
    ('bob', '1', '2024-04-02T06:32:05Z', '2024-04-02T07:05:54Z', '2029', '3', '3', '/product/42', '/cart'),
    ('bob', '2', '2024-04-02T10:02:22Z', '2024-04-02T10:22:39Z', '1217', '2', '2', '/cart', '/'),
    ('bob', '3', '2024-04-02T14:06:49Z', '2024-04-02T15:11:19Z', '3870', '7', '5', '/search', '/checkout'),
    ('carol', '1', '2024-04-02T09:51:57Z', '2024-04-02T10:26:45Z', '2088', '5', '5', '/checkout', '/product/17'),
    ('carol', '2', '2024-04-02T11:21:52Z', '2024-04-02T12:46:29Z', '5077', '7', '5', '/', '/help'),
    ('carol', '3', '2024-04-02T15:26:35Z', '2024-04-02T15:26:35Z', '0', '1', '1', '/account', '/account'),
    ('carol', '4', '2024-04-02T17:48:22Z', '2024-04-02T17:48:22Z', '0', '1', '1', '/checkout', '/checkout'),
    ('carol', '5', '2024-04-02T21:07:04Z', '2024-04-02T21:07:04Z', '0', '1', '1', '/account', '/account'),
    ('dave', '1', '2024-04-02T09:49:48Z', '2024-04-02T10:20:57Z', '1869', '3', '3', '/checkout', '/cart'),
    ('dave', '2', '2024-04-02T13:22:13Z', '2024-04-02T14:21:28Z', '3555', '5', '4', '/search', '/product/17'),
    ('dave', '3', '2024-04-02T15:31:03Z', '2024-04-02T15:31:03Z', '0', '1', '1', '/checkout', '/checkout'),
    ('dave', '4', '2024-04-02T20:44:57Z', '2024-04-02T21:06:31Z', '1294', '2', '2', '/checkout', '/cart'),
    ('dave', '5', '2024-04-03T01:33:02Z', '2024-04-03T01:34:54Z', '112', '2', '2', '/help', '/cart'),
    ('erin', '1', '2024-04-02T06:06:36Z', '2024-04-02T06:46:17Z', '2381', '3', '3', '/account', '/product/42'),
    ('erin', '2', '2024-04-02T10:34:35Z', '2024-04-02T12:13:54Z', '5959', '7', '6', '/product/17', '/help'),
    ('erin', '3', '2024-04-02T17:00:24Z', '2024-04-02T18:33:28Z', '5584', '7', '4', '/product/17', '/account'),
    ('erin', '4', '2024-04-02T21:59:47Z', '2024-04-02T23:32:59Z', '5592', '6', '5', '/checkout', '/help'),
    ('frank', '1', '2024-04-02T08:15:50Z', '2024-04-02T08:15:50Z', '0', '1', '1', '/checkout', '/checkout'),
    ('frank', '2', '2024-04-02T11:31:58Z', '2024-04-02T11:44:17Z', '739', '3', '2', '/', '/account'),
    ('frank', '3', '2024-04-02T14:24:22Z', '2024-04-02T14:49:59Z', '1537', '3', '3', '/product/42', '/account'),
    ('frank', '4', '2024-04-02T16:01:47Z', '2024-04-02T16:24:28Z', '1361', '2', '2', '/', '/cart'),
    ('gina', '1', '2024-04-02T22:00:00Z', '2024-04-02T22:30:00Z', '1800', '2', '2', '/', '/search'),
    ('gina', '2', '2024-04-02T23:00:01Z', '2024-04-02T23:00:01Z', '0', '2', '2', '/cart', '/checkout'),
    ('henry', '1', '2024-04-02T23:50:00Z', '2024-04-03T00:10:00Z', '1200', '2', '2', '/', '/help'),
]

EXPECTED_USERS = {
    'alice': {'bounce_sessions': 0, 'events': 11, 'longest_session_s': 2797, 'sessions': 3, 'total_duration_s': 4313},
    'bob': {'bounce_sessions': 0, 'events': 12, 'longest_session_s': 3870, 'sessions': 3, 'total_duration_s': 7116},
    'carol': {'bounce_sessions': 3, 'events': 15, 'longest_session_s': 5077, 'sessions': 5, 'total_duration_s': 7165},
    'dave': {'bounce_sessions': 1, 'events': 13, 'longest_session_s': 3555, 'sessions': 5, 'total_duration_s': 6830},
    'erin': {'bounce_sessions': 0, 'events': 23, 'longest_session_s': 5959, 'sessions': 4, 'total_duration_s': 19516},
    'frank': {'bounce_sessions': 1, 'events': 9, 'longest_session_s': 1537, 'sessions': 4, 'total_duration_s': 3637},
    'gina': {'bounce_sessions': 0, 'events': 4, 'longest_session_s': 1800, 'sessions': 2, 'total_duration_s': 1800},
    'henry': {'bounce_sessions': 0, 'events': 2, 'longest_session_s': 1200, 'sessions': 1, 'total_duration_s': 1200},
}


def _text(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    raw = p.read_bytes()
    assert b"\r" not in raw
    text = raw.decode("utf-8")
    assert text.endswith("\n"), f"{p} must end with a newline"
    return text


def _sessions():
    text = _text("sessions.csv")
    assert text.split("\n", 1)[0] == HEADER
    return [tuple(r) for r in csv.reader(text.splitlines()[1:])]


def test_input_untouched():
    digest = hashlib.sha256(Path("data/clicks.csv").read_bytes()).hexdigest()
    assert digest == "0ce771db2a6a34f4be3534a4c266423069a1cc89a7e40a021156c24237ac0297"


def test_session_keys_and_order():
    got = [(r[0], r[1]) for r in _sessions()]
    assert got == [(e[0], e[1]) for e in EXPECTED_SESSIONS]


def test_gap_boundaries():
    got = {(r[0], r[1]): r for r in _sessions()}
    # exactly 1800 s apart -> same session; 1801 s -> new session
    assert got[("gina", "1")][2:6] == ("2024-04-02T22:00:00Z", "2024-04-02T22:30:00Z", "1800", "2")
    # same instant, two pages: two events, ordered by page; exact re-sent copy dropped
    assert got[("gina", "2")][2:] == ("2024-04-02T23:00:01Z", "2024-04-02T23:00:01Z", "0", "2", "2", "/cart", "/checkout")
    # offset timestamp crossing midnight UTC, 20 minutes apart -> one session
    assert got[("henry", "1")][2:] == ("2024-04-02T23:50:00Z", "2024-04-03T00:10:00Z", "1200", "2", "2", "/", "/help")


def test_session_times_and_counts():
    got = {(r[0], r[1]): r[2:7] for r in _sessions()}
    exp = {(e[0], e[1]): e[2:7] for e in EXPECTED_SESSIONS}
    wrong = {k: (got.get(k), v) for k, v in exp.items() if got.get(k) != v}
    assert not wrong, wrong


def test_full_sessions_file():
    assert _sessions() == EXPECTED_SESSIONS


def test_user_stats():
    stats = json.loads(_text("user_stats.json"))
    assert set(stats) == {"users", "invalid_rows", "duplicate_events"}
    assert stats["users"] == EXPECTED_USERS


def test_invalid_and_duplicates():
    stats = json.loads(_text("user_stats.json"))
    assert stats["invalid_rows"] == 6
    assert stats["duplicate_events"] == 7
