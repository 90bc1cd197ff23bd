import csv
import hashlib
import json
from pathlib import Path

OUT = Path("out")

EXPECTED_VALID = [
    ('1003', 'Wale Eriksen', 'wale.eriksen@example.com', 'sales', '2022-12-23', '94000.00', ''),
    ('1005', 'Uma Eriksen', 'uma.eriksen@example.com', 'sales', '2024-06-26', '134500.00', ''),
    ('1006', 'Isla Bauer', 'isla.bauer@example.com', 'engineering', '2019-10-21', '107500.00', ''),
    ('1009', 'Isla Eriksen', 'isla.eriksen@example.com', 'finance', '2018-11-21', '103250.00', ''),
    ('1011', 'Amara Dubois', 'amara.dubois@example.com', 'hr', '2015-12-23', '46000.00', ''),
    ('1013', 'Femi Hansen', 'femi.hansen@example.com', 'engineering', '2022-10-17', '107000.00', '1006'),
    ('1015', 'Isla Bauer', 'isla.bauer@example.com', 'finance', '2024-06-15', '114500.00', '1009'),
    ('1018', 'Bauer, Mina', 'mina.bauer@example.com', 'sales', '2017-10-01', '113250.00', '1013'),
    ('1019', 'Jamal Jensen', 'jamal.jensen@example.com', 'engineering', '2021-04-10', '89250.00', ''),
    ('1021', 'Elena Lopez', 'elena.lopez@example.com', 'hr', '2019-10-27', '116000.00', '1009'),
    ('1025', 'Isla Jensen', 'isla.jensen@example.com', 'hr', '2023-01-04', '171000.00', '1013'),
    ('1030', 'Liam Ivanov', 'liam.ivanov@example.com', 'sales', '2024-05-15', '60250.00', '1011'),
    ('1033', 'Bruno Fischer', 'bruno.fischer@example.com', 'finance', '2018-02-25', '60500.00', '1032'),
    ('1038', 'Liam Nowak', 'liam.nowak@example.com', 'engineering', '2017-04-25', '122500.00', '1032'),
    ('1041', 'Pedro Okoro', 'pedro.okoro@example.com', 'sales', '2019-07-18', '102500.00', ''),
    ('1044', 'Mina Moreau', 'mina.moreau@example.com', 'hr', '2024-02-15', '180000.00', ''),
    ('1051', 'Gupta, Zeno', 'zeno.gupta@example.com', 'engineering', '2019-08-08', '52500.00', '1036'),
    ('1053', 'Olga Fischer', 'olga.fischer@example.com', 'engineering', '2017-04-26', '164500.00', ''),
    ('1057', 'Pedro Nowak', 'pedro.nowak@example.com', 'marketing', '2020-06-17', '110250.00', '1009'),
    ('1062', 'Xu Fischer', 'xu.fischer@example.com', 'support', '2016-04-11', '109000.00', '1021'),
    ('1065', 'Ivanov, Keiko', 'keiko.ivanov@example.com', 'hr', '2024-04-18', '400000.00', ''),
    ('1066', 'Wale Costa', 'wale.costa@example.com', 'hr', '2022-10-03', '71000.00', '1036'),
    ('1069', 'Amara Nowak', 'amara.nowak@example.com', 'marketing', '2024-01-15', '20000.00', '1006'),
    ('1071', 'Xu Gupta', 'xu.gupta@example.com', 'finance', '2015-07-16', '93500.00', ''),
    ('1076', 'Dev Fischer', 'dev.fischer@example.com', 'sales', '2017-10-03', '169250.00', '1065'),
    ('1081', 'Keiko Dubois', 'keiko.dubois@example.com', 'engineering', '2020-09-15', '135500.00', '1047'),
    ('1085', 'Keiko Moreau', 'keiko.moreau@example.com', 'marketing', '2017-03-27', '152000.00', '1052'),
    ('1087', 'Zeno Fischer', 'zeno.fischer@example.com', 'engineering', '2024-06-30', '43500.00', ''),
    ('1088', 'Mina Costa', 'mina.costa@example.com', 'engineering', '2024-05-15', '90000.00', '1015'),
    ('1093', 'Uma Khan', 'uma.khan@example.com', 'sales', '2015-12-04', '163500.00', '1074'),
    ('1096', 'Zeno Hansen', 'zeno.hansen@example.com', 'sales', '2022-06-12', '100250.50', '1053'),
    ('1098', 'Xu Ivanov', 'xu.ivanov@example.com', 'engineering', '2018-02-27', '110000.00', '1025'),
    ('1102', 'Vera Jensen', 'vera.jensen@example.com', 'engineering', '2016-09-06', '137000.00', '1057'),
    ('1105', 'Pedro Lopez', 'pedro.lopez@example.com', 'sales', '2017-06-02', '156000.50', '1005'),
    ('1107', 'Sina Gupta', 'sina.gupta@example.com', 'sales', '2022-07-27', '55000.00', '1024'),
    ('1109', 'Jamal Nowak', 'jamal.nowak@example.com', 'engineering', '2015-07-10', '45000.00', '1025'),
    ('1111', 'Liam Ivanov', 'liam.ivanov@example.com', 'engineering', '2021-02-26', '51000.00', ''),
    ('1114', 'Olga Lopez', 'olga.lopez@example.com', 'engineering', '2020-08-05', '63000.00', '1052'),
    ('1118', 'Uma Lopez', 'uma.lopez@example.com', 'hr', '2021-07-17', '155250.00', '1107'),
    ('1119', 'Wale Eriksen', 'wale.eriksen@example.com', 'sales', '2018-06-26', '130500.50', ''),
    ('1120', 'Lopez, Elena', 'elena.lopez@example.com', 'finance', '2021-09-17', '146250.00', '1069'),
    ('1123', 'Mina Fischer', 'mina.fischer@example.com', 'sales', '2019-03-13', '49000.00', ''),
    ('1126', 'Greta Ivanov', 'greta.ivanov@example.com', 'engineering', '2018-01-01', '164000.00', '1003'),
    ('1128', 'Xu Nowak', 'xu.nowak@example.com', 'hr', '2016-11-25', '97250.00', ''),
    ('1130', 'Keiko Fischer', 'keiko.fischer@example.com', 'marketing', '2024-04-19', '111000.00', ''),
    ('1133', 'Greta Lopez', 'greta.lopez@example.com', 'sales', '2020-06-14', '109000.00', '1041'),
    ('1134', 'Chloe Lopez', 'chloe.lopez@example.com', 'engineering', '2015-07-15', '46000.00', '1118'),
    ('1137', 'Bruno Costa', 'bruno.costa@example.com', 'engineering', '2019-06-05', '139250.00', '1096'),
]

EXPECTED_INVALID = [
    ('9', '01042', 'bad_id'),
    ('13', '1024', 'missing_name'),
    ('15', '1028', 'bad_email'),
    ('17', '1032', 'bad_department'),
    ('19', '1036', 'bad_hire_date'),
    ('22', '1040', 'bad_hire_date'),
    ('24', '1043', 'bad_salary'),
    ('26', '1047', 'bad_salary'),
    ('27', '1048', 'bad_manager'),
    ('28', '1049', 'bad_manager'),
    ('30', '1052', 'bad_manager'),
    ('32', '1053', 'duplicate_id'),
    ('34', '1059', 'bad_salary'),
    ('40', '1074', 'bad_hire_date'),
    ('41', '1999', 'bad_field_count'),
    ('43', 'abc', 'bad_id;bad_email;bad_department;bad_salary'),
    ('45', '1082', 'bad_manager'),
    ('49', '1090', 'bad_manager'),
    ('54', '1099', 'bad_salary'),
    ('56', '0', 'bad_id'),
    ('61', '2001', 'bad_field_count'),
    ('63', '1117', 'bad_manager'),
    ('71', '1131', 'bad_manager'),
    ('74', '1135', 'bad_manager'),
]

EXPECTED_REPORT = {'total_rows': 72, 'valid': 48, 'invalid': 24, 'reason_counts': {'bad_field_count': 2, 'bad_id': 3, 'duplicate_id': 1, 'missing_name': 1, 'bad_email': 2, 'bad_department': 2, 'bad_hire_date': 3, 'bad_salary': 5, 'bad_manager': 8}}


def _text(name):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    raw = p.read_bytes()
    assert b"\r" not in raw
    text = raw.decode("utf-8")
    assert text.endswith("\n"), f"{p} must end with a newline"
    return text


def _rows(name, header):
    text = _text(name)
    assert text.split("\n", 1)[0] == header
    return [tuple(r) for r in csv.reader(text.splitlines()[1:])]


def test_input_untouched():
    digest = hashlib.sha256(Path("data/employees.csv").read_bytes()).hexdigest()
    assert digest == "04b037e418c065687dc68f013dadf6a54d7829a478c1ab5c4894f55ca3033090"


def test_invalid_lines_and_ids():
    rows = _rows("invalid.csv", "line,emp_id,reasons")
    assert [r[:2] for r in rows] == [r[:2] for r in EXPECTED_INVALID]


def test_invalid_reasons():
    rows = {r[0]: r[2] for r in _rows("invalid.csv", "line,emp_id,reasons")}
    assert rows.get("43") == "bad_id;bad_email;bad_department;bad_salary"
    assert rows.get("32") == "duplicate_id"
    assert rows.get("30") == "bad_manager"      # manages themselves
    assert rows.get("49") == "bad_manager"      # manager id 01042 is not a valid id
    assert rows.get("41") == "bad_field_count"
    assert rows.get("61") == "bad_field_count"
    assert rows == {r[0]: r[2] for r in EXPECTED_INVALID}


def test_valid_ids():
    rows = _rows("valid.csv", "emp_id,full_name,email,department,hire_date,salary,manager_id")
    ids = [r[0] for r in rows]
    assert ids == [r[0] for r in EXPECTED_VALID]
    # boundary values that must be accepted
    for eid in ["1065", "1069", "1087", "1096", "1107"]:
        assert eid in ids, eid


def test_valid_normalisation():
    rows = {r[0]: r for r in _rows("valid.csv", "emp_id,full_name,email,department,hire_date,salary,manager_id")}
    assert rows["1003"] == ("1003", "Wale Eriksen", "wale.eriksen@example.com", "sales", "2022-12-23", "94000.00", "")
    assert rows["1018"][1] == "Bauer, Mina"
    assert rows["1065"][5] == "400000.00"
    assert rows["1096"][5] == "100250.50"
    assert rows["1006"][3] == "engineering"


def test_valid_full():
    rows = _rows("valid.csv", "emp_id,full_name,email,department,hire_date,salary,manager_id")
    assert rows == EXPECTED_VALID


def test_report():
    assert json.loads(_text("report.json")) == EXPECTED_REPORT
