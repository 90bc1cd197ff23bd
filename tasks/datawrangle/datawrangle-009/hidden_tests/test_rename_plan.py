import csv
import hashlib
import json
import os
from pathlib import Path

OUT = Path("out")
PHOTOS = Path("photos")

# final state of photos/: relative path -> sha256 of content
EXPECTED_TREE = {
    '2024/06/beach_01.jpg': '78c92f7dfb853b3bfcf0262a0a98e91abfc9162270262200ad5186352685fb08',
    '2024/06/beach_02.jpg': '1ca455acaa30e502b76ed997579a1e36271185b549f4eaa0a14e25f7be599b50',
    '2024/06/beach_03.jpg': '1df66e0dc099858f4a620f939dd710ad323929b7d6d95355511153657a74010a',
    '2024/06/scan, page 1.png': 'e9386bd1ced613b2a71ee29c3e78b839f4c0bb176018d4a6dab29dcc837014ab',
    '2024/keep.jpg': 'e0c3c083c6394f01c550025d29c5d167284a9f34565f0d8338fea79d1daf523c',
    'DSC_1001.jpg': 'ed1bb5d004b676d70b47f67484fbbaa783e03a942b3054ca2a83981123b83762',
    'DSC_1002.jpg': 'be8cdcc9a87e8294cae45be49bce8bd6a517fa23fb96cbf6e21cbb4f4c0ff1fa',
    'IMG_0004.jpg': 'b23f107f94039888f55d956c2bd4a7503ea0e056f3305d4b95158185bc317cb2',
    'IMG_0005.jpg': '44a50d7dfc101735642263adaf22d9316abd6da83b6a0941dccbf8fbb84b6448',
    'IMG_0006.jpg': '071c008fea3287c503f4b4a2879cba0540ba1311eaf6f48f36311a7fd92fae7d',
    'IMG_0007.JPG': 'b29d5b7b9ce66ea618407f1ac6f8752c811df8fe2285774c5eddb4bd324e50dd',
    'IMG_0008.jpg': 'cf93358ab05b7d2fbc1d8dbdef8ec91780aeef25a73b8fecc66ee06bc25ecac8',
    'IMG_0009.jpg': 'fb145bfce9d3ea33af229dbc7280b1c990c70fb7b0a65cc75223d883cb67761a',
    'IMG_0012.jpg': '9711fd30062fdc46ebdadad0dcd4e265475d351a787def46875e2cd2c8d5a017',
    'IMG_0013.jpg': '14a0d18fb3dd15875c0819b5cba2366ac92e43b1ddfd583f01e33712cd6359c2',
    'a.txt': '2e266b5b212f5a233fe60196c919ce58c9f4085a1008dfe7517f3a74cb7233c3',
    'archive/DSC_1001.jpg': '51af26942f3de46bf6b5202882a6e807b00021cde1dd6c0262d8b720521e0212',
    'b.txt': 'ed361ad557ad5f5703370702d061c083f3a3b8b60bd948018ccd87ecb5e83f29',
    'notes.txt': 'd453b4fe52a57cdc6c361a41af44b172cceb755785ce0f32e0cfa4db11816bff',
    'raw/IMG_0011.jpg': '15e46df4a041f7b9d5c473d678f36153e8a9d08dcc370eb91e344c03371d9dc6',
}

EXPECTED_MANIFEST = [
    ('IMG_0001.jpg', '2024/06/beach_01.jpg', 'renamed', '78c92f7dfb853b3bfcf0262a0a98e91abfc9162270262200ad5186352685fb08'),
    ('IMG_0002.jpg', '2024/06/beach_02.jpg', 'renamed', '1ca455acaa30e502b76ed997579a1e36271185b549f4eaa0a14e25f7be599b50'),
    ('IMG_0003.jpg', '2024/06/beach_03.jpg', 'renamed', '1df66e0dc099858f4a620f939dd710ad323929b7d6d95355511153657a74010a'),
    ('IMG_0004.jpg', '2024/06/dup.jpg', 'conflict', 'b23f107f94039888f55d956c2bd4a7503ea0e056f3305d4b95158185bc317cb2'),
    ('IMG_0005.jpg', '2024/06/dup.jpg', 'conflict', '44a50d7dfc101735642263adaf22d9316abd6da83b6a0941dccbf8fbb84b6448'),
    ('IMG_9999.jpg', '2024/06/ghost.jpg', 'missing', ''),
    ('IMG_0006.jpg', '2024/keep.jpg', 'blocked', '071c008fea3287c503f4b4a2879cba0540ba1311eaf6f48f36311a7fd92fae7d'),
    ('a.txt', 'b.txt', 'renamed', 'ed361ad557ad5f5703370702d061c083f3a3b8b60bd948018ccd87ecb5e83f29'),
    ('b.txt', 'a.txt', 'renamed', '2e266b5b212f5a233fe60196c919ce58c9f4085a1008dfe7517f3a74cb7233c3'),
    ('IMG_0007.JPG', 'IMG_0007.JPG', 'unchanged', 'b29d5b7b9ce66ea618407f1ac6f8752c811df8fe2285774c5eddb4bd324e50dd'),
    ('IMG_0008.jpg', '../escape.jpg', 'invalid', 'cf93358ab05b7d2fbc1d8dbdef8ec91780aeef25a73b8fecc66ee06bc25ecac8'),
    ('IMG_0009.jpg', '/tmp/abs.jpg', 'invalid', 'fb145bfce9d3ea33af229dbc7280b1c990c70fb7b0a65cc75223d883cb67761a'),
    ('IMG_0012.jpg', '', 'invalid', '9711fd30062fdc46ebdadad0dcd4e265475d351a787def46875e2cd2c8d5a017'),
    ('IMG_0010.jpg', 'DSC_1001.jpg', 'renamed', 'ed1bb5d004b676d70b47f67484fbbaa783e03a942b3054ca2a83981123b83762'),
    ('DSC_1001.jpg', 'archive/DSC_1001.jpg', 'renamed', '51af26942f3de46bf6b5202882a6e807b00021cde1dd6c0262d8b720521e0212'),
    ('IMG_0013.jpg', 'DSC_1002.jpg', 'blocked', '14a0d18fb3dd15875c0819b5cba2366ac92e43b1ddfd583f01e33712cd6359c2'),
    ('DSC_1002.jpg', 'IMG_0006.jpg', 'blocked', 'be8cdcc9a87e8294cae45be49bce8bd6a517fa23fb96cbf6e21cbb4f4c0ff1fa'),
    ('scan 01.png', '2024/06/scan, page 1.png', 'renamed', 'e9386bd1ced613b2a71ee29c3e78b839f4c0bb176018d4a6dab29dcc837014ab'),
    ('raw/IMG_0011.jpg', '2024/06/beach_04.jpg', 'conflict', '15e46df4a041f7b9d5c473d678f36153e8a9d08dcc370eb91e344c03371d9dc6'),
    ('raw/IMG_0011.jpg', '2024/06/beach_05.jpg', 'conflict', '15e46df4a041f7b9d5c473d678f36153e8a9d08dcc370eb91e344c03371d9dc6'),
]


def _sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _tree():
    found = {}
    for dp, _, fns in os.walk(PHOTOS):
        for fn in fns:
            p = os.path.join(dp, fn)
            found[os.path.relpath(p, PHOTOS).replace(os.sep, "/")] = _sha(p)
    return found


def _text(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    raw = p.read_bytes()
    assert b"\r" not in raw
    text = raw.decode("utf-8")
    assert text.endswith("\n"), f"{p} must end with a newline"
    return text


def test_plan_untouched():
    assert _sha("rename_map.csv") == "f7b9b5fcaae42251f466f97abaebd528ed4439aecce16d560c2cf5a09a022a35"


def test_renames_applied():
    tree = _tree()
    for path in ["2024/06/beach_01.jpg", "2024/06/beach_02.jpg", "2024/06/beach_03.jpg",
                 "2024/06/scan, page 1.png", "archive/DSC_1001.jpg"]:
        assert tree.get(path) == EXPECTED_TREE[path], path
    for gone in ["IMG_0001.jpg", "IMG_0002.jpg", "IMG_0003.jpg", "IMG_0010.jpg", "scan 01.png"]:
        assert gone not in tree, gone


def test_swap_and_chain():
    tree = _tree()
    # a.txt <-> b.txt swapped
    assert tree.get("a.txt") == "2e266b5b212f5a233fe60196c919ce58c9f4085a1008dfe7517f3a74cb7233c3"
    assert tree.get("b.txt") == "ed361ad557ad5f5703370702d061c083f3a3b8b60bd948018ccd87ecb5e83f29"
    # IMG_0010 -> DSC_1001 while DSC_1001 -> archive/DSC_1001
    assert tree.get("DSC_1001.jpg") == "ed1bb5d004b676d70b47f67484fbbaa783e03a942b3054ca2a83981123b83762"
    assert tree.get("archive/DSC_1001.jpg") == "51af26942f3de46bf6b5202882a6e807b00021cde1dd6c0262d8b720521e0212"


def test_blocked_files_stay():
    tree = _tree()
    assert tree.get("IMG_0006.jpg") == EXPECTED_TREE["IMG_0006.jpg"]
    assert tree.get("2024/keep.jpg") == EXPECTED_TREE["2024/keep.jpg"]
    assert tree.get("DSC_1002.jpg") == EXPECTED_TREE["DSC_1002.jpg"]
    assert tree.get("IMG_0013.jpg") == EXPECTED_TREE["IMG_0013.jpg"]


def test_exact_final_tree():
    assert _tree() == EXPECTED_TREE
    assert not Path("escape.jpg").exists()


def test_manifest():
    text = _text("manifest.csv")
    assert text.split("\n", 1)[0] == "old,new,status,sha256"
    rows = [tuple(r) for r in csv.reader(text.splitlines()[1:])]
    assert rows == EXPECTED_MANIFEST


def test_summary():
    assert json.loads(_text("summary.json")) == {
        "renamed": 8, "unchanged": 1, "blocked": 3, "conflict": 4, "missing": 1, "invalid": 3,
    }
