import hashlib
from pathlib import Path

OUT = Path("out")

EXPECTED_LINES = [
    'shipment_id\tcarrier\tship_date\tweight_kg\tdestination',
    'SH00801\tFedEx\t2024-02-29\t8.80\tGdansk',
    'SH00701\tDHL\t2024-05-02\t13.55\tLeeds',
    'SH00702\tUPS\t2023-09-12\t10.21\tLyon',
    'SH00703\tUPS\t2023-07-26\t15.90\tPorto',
    'SH00704\tDHL\t2023-06-06\t4.02\tRotterdam',
    'SH00705\tRoyal Mail\t2024-01-20\t0.99\tGdansk',
    'SH00706\tUPS\t2023-05-24\t5.27\tLeeds',
    'SH00707\tDHL\t2023-07-07\t28.92\tLeeds',
    'SH00800\tPostNL\t\t6.42\tRotterdam',
    'SH00708\tFedEx\t2023-03-04\t15.30\tLyon',
    'SH00709\tUPS\t2023-11-30\t11.44\tKyoto',
    'SH00710\tUPS\t2023-04-11\t23.92\tRotterdam',
    'SH00711\tDHL\t2023-02-17\t3.95\tGdansk',
    'SH00793\tLa Poste\t\t28.48\tPorto',
    'SH00712\tLa Poste\t2023-07-22\t7.31\tPorto',
    'SH00713\tDHL\t2024-05-23\t9.32\tGdansk',
    'SH00714\tDHL\t2023-11-02\t20.93\tBerlin',
    'SH00715\tRoyal Mail\t2023-07-21\t5.20\tLyon',
    'SH00806\tFedEx\t2024-02-09\t20.41\tGdansk',
    'SH00716\tLa Poste\t2023-06-11\t14.47\tRotterdam',
    'SH00717\tUPS\t2023-08-03\t26.85\tLeeds',
    'SH00718\tPostNL\t2023-06-28\t10.80\tKyoto',
    'SH00719\tDHL\t2024-05-08\t24.57\tBerlin',
    'SH00720\tUPS\t2023-06-07\t9.13\tRotterdam',
    'SH00721\tUPS\t2024-05-13\t5.57\tRotterdam',
    'SH00796\tFedEx\t\t24.69\tKyoto',
    'SH00722\tRoyal Mail\t2023-10-06\t9.54\tLeeds',
    'SH00723\tPostNL\t2023-07-12\t12.74\tKyoto',
    'SH00724\tPostNL\t2023-09-29\t16.44\tGdansk',
    'SH00725\tPostNL\t2023-10-31\t24.23\tGdansk',
    'SH00726\tPostNL\t2023-04-04\t9.05\tPorto',
    'SH00727\tRoyal Mail\t2024-01-13\t28.41\tKyoto',
    'SH00728\tDHL\t2023-10-28\t21.47\tAustin',
    'SH00794\tFedEx\t\t11.16\tAustin',
    'SH00729\tPostNL\t2023-04-23\t27.69\tGdansk',
    'SH00730\tPostNL\t2024-04-29\t16.25\tGdansk',
    'SH00731\tDHL\t2023-07-23\t29.23\tRotterdam',
    'SH00732\tUPS\t2023-10-04\t26.53\tLeeds',
    'SH00733\tUPS\t2023-07-10\t15.36\tGdansk',
    'SH00734\tLa Poste\t2023-09-18\t10.85\tAustin',
    'SH00735\tFedEx\t2024-01-11\t18.81\tRotterdam',
    'SH00792\tUPS\t\t28.02\tKyoto',
    'SH00736\tUPS\t2023-02-09\t14.93\tLeeds',
    'SH00737\tDHL\t2023-03-24\t4.72\tPorto',
    'SH00738\tRoyal Mail\t2024-03-25\t0.96\tAustin',
    'SH00739\tDHL\t2023-01-13\t18.57\tLeeds',
    'SH00740\tPostNL\t2024-01-21\t27.90\tLyon',
    'SH00741\tRoyal Mail\t2023-05-01\t17.44\tPorto',
    'SH00742\tDHL\t2023-02-19\t17.77\tKyoto',
    'SH00743\tPostNL\t2023-02-17\t24.14\tLyon',
    'SH00744\tDHL\t2023-03-11\t14.02\tLeeds',
    'SH00791\tRoyal Mail\t\t9.17\tBerlin',
    'SH00745\tPostNL\t2023-08-17\t2.46\tGdansk',
    'SH00746\tFedEx\t2024-04-30\t12.65\tKyoto',
    'SH00747\tPostNL\t2023-05-16\t0.38\tRotterdam',
    'SH00795\tLa Poste\t\t11.24\tKyoto',
    'SH00748\tUPS\t2023-02-08\t24.43\tBerlin',
    'SH00749\tPostNL\t2024-05-15\t6.92\tKyoto',
    'SH00750\tPostNL\t2023-05-29\t0.83\tGdansk',
    'SH00751\tPostNL\t2023-10-14\t15.72\tLeeds',
    'SH00752\tFedEx\t2023-01-08\t13.96\tKyoto',
    'SH00753\tRoyal Mail\t2023-05-15\t8.01\tPorto',
    'SH00754\tDHL\t2023-08-02\t15.36\tAustin',
    'SH00755\tRoyal Mail\t2023-09-23\t26.54\tPorto',
    'SH00756\tDHL\t2023-06-12\t27.55\tLyon',
    'SH00757\tUPS\t2024-06-07\t5.68\tLyon',
    'SH00804\tLa Poste\t2024-01-01\t27.99\tAustin',
    'SH00805\tPostNL\t2024-01-01\t28.72\tAustin',
    'SH00758\tRoyal Mail\t2023-12-29\t9.10\tLyon',
    'SH00759\tUPS\t2024-01-09\t15.10\tPorto',
    'SH00803\tDHL\t2023-12-31\t23.68\tAustin',
    'SH00760\tRoyal Mail\t2023-11-09\t24.09\tRotterdam',
    'SH00761\tRoyal Mail\t2023-03-21\t13.65\tBerlin',
    'SH00762\tLa Poste\t2023-02-19\t3.01\tKyoto',
    'SH00763\tRoyal Mail\t2023-06-25\t29.30\tGdansk',
    'SH00764\tFedEx\t2023-02-08\t29.19\tRotterdam',
    'SH00765\tPostNL\t2023-02-14\t11.32\tLeeds',
    'SH00802\tUPS\t2024-02-29\t8.75\tKyoto',
    'SH00766\tLa Poste\t2023-03-09\t29.63\tLyon',
    'SH00767\tRoyal Mail\t2024-01-28\t1.15\tGdansk',
    'SH00768\tUPS\t2024-01-13\t14.59\tAustin',
    'SH00769\tPostNL\t2023-11-30\t24.06\tKyoto',
    'SH00799\tUPS\t\t2.95\tLyon',
    'SH00798\tDHL\t\t10.81\tPorto',
    'SH00770\tLa Poste\t2023-11-26\t1.82\tKyoto',
    'SH00771\tPostNL\t2023-12-07\t18.39\tKyoto',
    'SH00772\tUPS\t2024-06-01\t11.77\tKyoto',
    'SH00773\tUPS\t2023-06-22\t9.54\tKyoto',
    'SH00774\tDHL\t2024-01-06\t26.81\tBerlin',
    'SH00775\tPostNL\t2023-09-28\t24.05\tPorto',
    'SH00776\tUPS\t2023-05-12\t6.95\tGdansk',
    'SH00777\tLa Poste\t2023-01-21\t8.28\tPorto',
    'SH00778\tRoyal Mail\t2023-07-22\t22.05\tGdansk',
    'SH00779\tPostNL\t2024-04-02\t15.44\tAustin',
    'SH00780\tLa Poste\t2023-06-14\t29.16\tPorto',
    'SH00781\tLa Poste\t2023-01-31\t13.65\tKyoto',
    'SH00782\tFedEx\t2023-05-21\t19.09\tAustin',
    'SH00783\tUPS\t2023-07-30\t7.28\tBerlin',
    'SH00784\tUPS\t2023-10-23\t7.79\tBerlin',
    'SH00785\tFedEx\t2023-01-09\t16.93\tRotterdam',
    'SH00797\tPostNL\t\t10.24\tBerlin',
    'SH00786\tLa Poste\t2023-07-21\t24.32\tRotterdam',
    'SH00787\tDHL\t2024-02-21\t0.72\tPorto',
    'SH00788\tRoyal Mail\t2023-01-18\t22.59\tRotterdam',
    'SH00789\tFedEx\t2023-09-03\t2.08\tLyon',
    'SH00790\tLa Poste\t2023-04-08\t27.28\tLeeds',
]

EXPECTED_UNPARSED = [
    "shipment_id\toriginal_value",
    "SH00800\t20230230",
    "SH00793\tTBD",
    "SH00796\t2023-13-01",
    "SH00794\t",
    "SH00792\t31.04.2024",
    "SH00791\t02/30/2023",
    "SH00795\t3/4/24",
    "SH00799\t2024-02-29T10:00",
    "SH00798\tFebuary 3, 2024",
    "SH00797\tn/a",
]


def _read(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    data = p.read_bytes()
    assert b"\r" not in data, f"{p} contains carriage returns"
    return data.decode("utf-8")


def _rows(text):
    assert text.endswith("\n")
    return text.split("\n")[:-1]


def test_input_untouched():
    digest = hashlib.sha256(Path("data/shipments.tsv").read_bytes()).hexdigest()
    assert digest == "3ae64468e48492dcb4cb158b74196a078963bd7a6e9e1455b5f66341c9486cf5"


def test_header_and_row_count():
    rows = _rows(_read("shipments_iso.tsv"))
    assert rows[0] == "shipment_id\tcarrier\tship_date\tweight_kg\tdestination"
    assert len(rows) == len(EXPECTED_LINES)


def test_ids_order_and_other_fields():
    rows = [r.split("\t") for r in _rows(_read("shipments_iso.tsv"))]
    exp = [r.split("\t") for r in EXPECTED_LINES]
    assert all(len(r) == 5 for r in rows)
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [(r[0], r[1], r[3], r[4]) for r in exp]


def test_iso_dates():
    rows = [r.split("\t") for r in _rows(_read("shipments_iso.tsv"))]
    got = {r[0]: r[2] for r in rows[1:]}
    exp = {r.split("\t")[0]: r.split("\t")[2] for r in EXPECTED_LINES[1:]}
    wrong = {k: (got.get(k), v) for k, v in exp.items() if got.get(k) != v}
    assert not wrong, wrong


def test_tricky_dates():
    rows = [r.split("\t") for r in _rows(_read("shipments_iso.tsv"))]
    got = {r[0]: r[2] for r in rows[1:]}
    assert got["SH00801"] == "2024-02-29"   # 2/29/2024, leap day, US order
    assert got["SH00802"] == "2024-02-29"   # 29.02.2024
    assert got["SH00722"] == "2023-10-06"   # 10/6/2023 is month-first
    assert got["SH00721"] == "2024-05-13"   # 13.5.2024 is day-first
    assert got["SH00806"] == "2024-02-09"   # 2024-2-9
    assert got["SH00800"] == ""             # 20230230 does not exist
    assert got["SH00799"] == ""             # has a time part


def test_whole_file_exact():
    assert _rows(_read("shipments_iso.tsv")) == EXPECTED_LINES


def test_unparsed():
    assert _rows(_read("unparsed.tsv")) == EXPECTED_UNPARSED
