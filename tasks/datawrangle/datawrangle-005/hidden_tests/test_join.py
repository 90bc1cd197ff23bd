import csv
import hashlib
from pathlib import Path

OUT = Path("out")

EXPECTED_DETAILS = [
    ('105', 'C0119', 'Dupont SARL', 'FR', '76.80'),
    ('109', 'C0070', 'Tomás García', 'SE', '321.44'),
    ('116', 'C0105', 'Fatima Al-Sayed', 'BR', '85.90'),
    ('121', 'C0007', 'Jane Smith', 'GB', '791.36'),
    ('125', 'C0105', 'Fatima Al-Sayed', 'BR', '49.80'),
    ('134', 'C0203', 'Pat Kowalski', 'SE', '76.50'),
    ('143', 'C0119', 'Dupont SARL', 'FR', '28.90'),
    ('147', 'C0021', 'Okafor & Sons Ltd', 'JP', '661.71'),
    ('155', 'C0119', 'Dupont SARL', 'FR', '327.00'),
    ('159', 'C0161', 'Maria Ivanova', 'NL', '564.24'),
    ('165', 'C0231', 'Luca Bianchi', 'SE', '17.34'),
    ('174', 'C0245', 'Mateo Silva', 'BR', '39.28'),
    ('177', 'C0238', 'Sofia Rossi', 'US', '54.70'),
    ('186', 'C0014', 'Smith, Jane', 'GB', '12.10'),
    ('191', 'C0084', 'Kim Min-jun', 'IT', '192.77'),
    ('194', 'C0098', 'Zhang Ling', 'NL', '14.90'),
    ('199', 'C0105', 'Fatima Al-Sayed', 'BR', '35.00'),
    ('207', 'C0014', 'Smith, Jane', 'GB', '79.40'),
    ('213', 'C0175', 'Alex Morgan', 'NL', '506.20'),
    ('218', 'C0196', 'Riley Chen', 'DE', '31.00'),
    ('227', 'C0196', 'Riley Chen', 'DE', '31.00'),
    ('234', 'C0245', 'Mateo Silva', 'BR', '500.07'),
    ('238', 'C0077', 'Nordic Supplies AB', 'IT', '109.00'),
    ('242', 'C0231', 'Luca Bianchi', 'SE', '440.00'),
    ('245', 'C0210', 'Noor Haddad', 'FR', '630.62'),
    ('254', 'C0042', 'Ana Lúcia Costa', 'NL', '80.80'),
    ('255', 'C0238', 'Sofia Rossi', 'US', '193.64'),
    ('259', 'C0035', 'Li Wei', 'FR', '368.00'),
    ('267', 'C0196', 'Riley Chen', 'DE', '443.81'),
    ('275', 'C0049', 'Bob "The Builder" Jones', 'FR', '435.00'),
    ('276', 'C0014', 'Smith, Jane', 'GB', '103.00'),
    ('279', 'C0007', 'Jane Smith', 'GB', '254.92'),
    ('286', 'C0035', 'Li Wei', 'FR', '34.40'),
    ('294', 'C0175', 'Alex Morgan', 'NL', '249.00'),
    ('300', 'C0077', 'Nordic Supplies AB', 'IT', '464.00'),
    ('308', 'C0126', 'Yuki Tanaka', 'NL', '173.04'),
    ('312', 'C0154', 'Lars Petersen', 'NL', '123.00'),
    ('319', 'C0091', "O'Brien, Siobhan", 'NL', '109.00'),
    ('326', 'C0084', 'Kim Min-jun', 'IT', '242.00'),
    ('328', 'C0042', 'Ana Lúcia Costa', 'NL', '186.00'),
    ('331', 'C0210', 'Noor Haddad', 'FR', '874.13'),
    ('335', 'C0091', "O'Brien, Siobhan", 'NL', '210.00'),
    ('341', 'C0035', 'Li Wei', 'FR', '628.84'),
    ('345', 'C0007', 'Jane Smith', 'GB', '49.60'),
    ('354', 'C0007', 'Jane Smith', 'GB', '144.44'),
    ('357', 'C0203', 'Pat Kowalski', 'SE', '643.88'),
    ('358', 'C0189', 'Casey Brown', 'IT', '39.00'),
    ('361', 'C0238', 'Sofia Rossi', 'US', '69.00'),
    ('366', 'C0021', 'Okafor & Sons Ltd', 'JP', '8.80'),
    ('374', 'C0084', 'Kim Min-jun', 'IT', '364.36'),
    ('377', 'C0070', 'Tomás García', 'SE', '661.43'),
    ('382', 'C0119', 'Dupont SARL', 'FR', '130.00'),
    ('385', 'C0119', 'Dupont SARL', 'FR', '76.30'),
    ('390', 'C0245', 'Mateo Silva', 'BR', '840.51'),
    ('393', 'C0084', 'Kim Min-jun', 'IT', '823.10'),
    ('399', 'C0119', 'Dupont SARL', 'FR', '113.00'),
    ('405', 'C0070', 'Tomás García', 'SE', '271.00'),
    ('406', 'C0119', 'Dupont SARL', 'FR', '748.57'),
    ('409', 'C0175', 'Alex Morgan', 'NL', '157.00'),
    ('413', 'C0203', 'Pat Kowalski', 'SE', '7.80'),
    ('417', 'C0238', 'Sofia Rossi', 'US', '109.46'),
    ('424', 'C0077', 'Nordic Supplies AB', 'IT', '523.25'),
    ('425', 'C0126', 'Yuki Tanaka', 'NL', '68.00'),
    ('434', 'C0161', 'Maria Ivanova', 'NL', '832.88'),
    ('440', 'C0007', 'Jane Smith', 'GB', '477.15'),
    ('441', 'C0042', 'Ana Lúcia Costa', 'NL', '238.24'),
    ('443', 'C0231', 'Luca Bianchi', 'SE', '45.30'),
    ('451', 'C0196', 'Riley Chen', 'DE', '82.66'),
    ('453', 'C0035', 'Li Wei', 'FR', '27.60'),
    ('461', 'C0245', 'Mateo Silva', 'BR', '88.50'),
    ('463', 'C0238', 'Sofia Rossi', 'US', '139.00'),
    ('472', 'C0007', 'Jane Smith', 'GB', '154.00'),
    ('477', 'C0105', 'Fatima Al-Sayed', 'BR', '97.00'),
    ('481', 'C0091', "O'Brien, Siobhan", 'NL', '37.00'),
    ('489', 'C0084', 'Kim Min-jun', 'IT', '306.00'),
    ('494', 'C0210', 'Noor Haddad', 'FR', '611.32'),
    ('499', 'C0091', "O'Brien, Siobhan", 'NL', '24.00'),
    ('500', 'C0126', 'Yuki Tanaka', 'NL', '66.10'),
    ('502', 'C0203', 'Pat Kowalski', 'SE', '190.00'),
    ('511', 'C0007', 'Jane Smith', 'GB', '173.00'),
    ('512', 'C0140', 'Chidi Eze', 'US', '84.90'),
    ('517', 'C0154', 'Lars Petersen', 'NL', '266.00'),
    ('523', 'C0126', 'Yuki Tanaka', 'NL', '89.70'),
    ('530', 'C0203', 'Pat Kowalski', 'SE', '10.00'),
    ('535', 'C0098', 'Zhang Ling', 'NL', '776.25'),
    ('543', 'C0098', 'Zhang Ling', 'NL', '319.00'),
    ('552', 'C0147', 'Hana Novak', 'NG', '65.10'),
    ('554', 'C0077', 'Nordic Supplies AB', 'IT', '26.20'),
    ('557', 'C0203', 'Pat Kowalski', 'SE', '658.62'),
    ('559', 'C0238', 'Sofia Rossi', 'US', '478.00'),
    ('566', 'C0189', 'Casey Brown', 'IT', '655.69'),
    ('575', 'C0140', 'Chidi Eze', 'US', '197.69'),
    ('581', 'C0105', 'Fatima Al-Sayed', 'BR', '542.76'),
    ('587', 'C0119', 'Dupont SARL', 'FR', '70.70'),
    ('595', 'C0133', 'Ola Nordmann', 'GB', '23.30'),
    ('603', 'C0238', 'Sofia Rossi', 'US', '82.10'),
    ('606', 'C0077', 'Nordic Supplies AB', 'IT', '75.50'),
    ('612', 'C0070', 'Tomás García', 'SE', '328.00'),
    ('618', 'C0238', 'Sofia Rossi', 'US', '65.34'),
    ('620', 'C0154', 'Lars Petersen', 'NL', '224.00'),
    ('627', 'C0007', 'Jane Smith', 'GB', '53.40'),
    ('628', 'C0161', 'Maria Ivanova', 'NL', '48.10'),
    ('631', 'C0119', 'Dupont SARL', 'FR', '491.00'),
    ('633', 'C0014', 'Smith, Jane', 'GB', '82.30'),
    ('636', 'C0091', "O'Brien, Siobhan", 'NL', '119.00'),
    ('639', 'C0189', 'Casey Brown', 'IT', '58.60'),
    ('648', 'C0238', 'Sofia Rossi', 'US', '445.99'),
    ('657', 'C0224', 'Ingrid Berg', 'DE', '341.00'),
    ('664', 'C0091', "O'Brien, Siobhan", 'NL', '488.00'),
    ('668', 'C0196', 'Riley Chen', 'DE', '40.00'),
]

EXPECTED_ORPHANS = [
    ('671', 'C9999', '2024-04-17', '7.19'),
    ('676', 'C0500', '2024-02-07', '248.82'),
    ('680', '', '2024-02-28', '336.34'),
    ('684', '', '2024-03-28', '498.90'),
    ('688', 'C014', '2024-05-10', '841.22'),
    ('690', 'X0021', '2024-04-19', '334.69'),
]

EXPECTED_TOTALS = [
    ('C0210', 'Noor Haddad', '3', '2116.07'),
    ('C0007', 'Jane Smith', '8', '2097.87'),
    ('C0119', 'Dupont SARL', '9', '2062.27'),
    ('C0084', 'Kim Min-jun', '5', '1928.23'),
    ('C0238', 'Sofia Rossi', '9', '1637.23'),
    ('C0203', 'Pat Kowalski', '6', '1586.80'),
    ('C0070', 'Tomás García', '4', '1581.87'),
    ('C0245', 'Mateo Silva', '4', '1468.36'),
    ('C0161', 'Maria Ivanova', '3', '1445.22'),
    ('C0077', 'Nordic Supplies AB', '5', '1197.95'),
    ('C0098', 'Zhang Ling', '3', '1110.15'),
    ('C0035', 'Li Wei', '4', '1058.84'),
    ('C0091', "O'Brien, Siobhan", '6', '987.00'),
    ('C0175', 'Alex Morgan', '3', '912.20'),
    ('C0105', 'Fatima Al-Sayed', '5', '810.46'),
    ('C0189', 'Casey Brown', '3', '753.29'),
    ('C0021', 'Okafor & Sons Ltd', '2', '670.51'),
    ('C0196', 'Riley Chen', '5', '628.47'),
    ('C0154', 'Lars Petersen', '3', '613.00'),
    ('C0042', 'Ana Lúcia Costa', '3', '505.04'),
    ('C0231', 'Luca Bianchi', '3', '502.64'),
    ('C0049', 'Bob "The Builder" Jones', '1', '435.00'),
    ('C0126', 'Yuki Tanaka', '4', '396.84'),
    ('C0224', 'Ingrid Berg', '1', '341.00'),
    ('C0140', 'Chidi Eze', '2', '282.59'),
    ('C0014', 'Smith, Jane', '4', '276.80'),
    ('C0147', 'Hana Novak', '1', '65.10'),
    ('C0133', 'Ola Nordmann', '1', '23.30'),
    ('C0028', 'Müller GmbH', '0', '0.00'),
    ('C0056', 'Acme, Inc.', '0', '0.00'),
    ('C0063', 'Priya Natarajan', '0', '0.00'),
    ('C0112', 'Rossi & Figli, S.r.l.', '0', '0.00'),
    ('C0168', 'Sam Taylor', '0', '0.00'),
    ('C0182', 'Jordan Lee', '0', '0.00'),
    ('C0217', 'Emeka Obi', '0', '0.00'),
]


def _rows(name, header):
    p = OUT / name
    assert p.is_file(), f"{p} was not produced"
    raw = p.read_bytes()
    assert b"\r" not in raw, f"{p} must use \\n line endings"
    text = raw.decode("utf-8")
    assert text.endswith("\n"), f"{p} must end with a newline"
    assert text.split("\n", 1)[0] == header
    rows = list(csv.reader(text.splitlines()[1:]))
    return [tuple(r) for r in rows]


def test_inputs_untouched():
    for path, digest in [
        ("data/customers.csv", "d5b0d31fa24be24af508b4e952120718fd64c2935bdbe0dcc4dbb3a04c15bd6e"),
        ("data/orders.csv", "c475a94e183c7eefe17a1b18b5496e2bf4f2ce605bc7b5598a50180009757679"),
    ]:
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, path


def test_order_details():
    rows = _rows("order_details.csv", "order_id,customer_id,customer_name,country,amount")
    assert len(rows) == len(EXPECTED_DETAILS)
    assert rows == EXPECTED_DETAILS


def test_order_details_key_normalisation():
    rows = _rows("order_details.csv", "order_id,customer_id,customer_name,country,amount")
    by_id = {r[0]: r for r in rows}
    # lower-case / padded ids in orders.csv must still join
    assert by_id["552"] == ("552", "C0147", "Hana Novak", "NG", "65.10")
    assert by_id["633"][1:3] == ("C0014", "Smith, Jane")
    assert by_id["276"][1:3] == ("C0014", "Smith, Jane")
    assert not any(r[2] == "DUPLICATE ENTRY - ignore" for r in rows)


def test_orphan_orders():
    rows = _rows("orphan_orders.csv", "order_id,customer_id,order_date,amount")
    assert rows == EXPECTED_ORPHANS


def test_customer_totals():
    rows = _rows("customer_totals.csv", "customer_id,customer_name,order_count,total_amount")
    assert rows == EXPECTED_TOTALS


def test_totals_consistent_with_details():
    details = _rows("order_details.csv", "order_id,customer_id,customer_name,country,amount")
    totals = _rows("customer_totals.csv", "customer_id,customer_name,order_count,total_amount")
    assert sum(int(r[2]) for r in totals) == len(details)
    assert len({r[0] for r in totals}) == len(totals) == 35
