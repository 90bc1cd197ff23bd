"""Generated check of pyfix-027: floats behave like the decimal number they print as.

Amounts and rates are drawn as decimal texts with few digits (so the "number a float
prints as" is unambiguous) and passed as float, str or Decimal. Many are chosen so
that the exact decimal result lands on a half cent -- where a float's binary value just
below the half makes the buggy code round down -- and the rest are ordinary values.
Cases cover round_money, to_decimal, apply_rate, line_total, split_evenly and Invoice
totals (and a bool, which must raise TypeError). Decimal results travel as their string
(quantized results) or normalized string (to_decimal, whose exponent is not specified).
"""

from decimal import Decimal

RATES = [
    "0.0725",
    "0.15",
    "0.075",
    "0.2",
    "0.19",
    "0.07",
    "0.085",
    "0.0625",
    "0.05",
    "0.015",
    "0.125",
    "0.175",
    "0.035",
    "0.0825",
    "0.045",
    "0.25",
]


def _is_half_cent(d):
    d = d * 1000
    return d == d.to_integral_value() and int(d) % 10 == 5


def _below(text):
    """Whether the float nearest to the (positive) decimal ``text`` lies below it."""
    return Decimal(float(text)) < Decimal(text)


def _price(rng, decimals=2, lo=0, hi=999):
    whole = rng.randint(lo, hi)
    frac = rng.randint(0, 10**decimals - 1)
    return f"{whole}.{frac:0{decimals}d}"


def _half(rng, below):
    """A half-cent amount such as ``"12.345"``; if ``below``, one whose float is just below it."""
    for _ in range(400):
        text = f"{rng.randint(0, 999)}.{rng.randint(0, 99):02d}5"
        if not below or _below(text):
            return text
    return "2.675"


def _signed(rng, text):
    return "-" + text if rng.random() < 0.25 else text


def _spec(kind, text):
    return ["f", float(text)] if kind == "f" else [kind, text]


def _rate_case(rng, bug):
    for _ in range(600):
        amount, rate = _price(rng, 2, 0, 500), rng.choice(RATES)
        akind, rkind = rng.choice("fsd"), ("f" if bug else rng.choice("ffs"))
        exact = Decimal(amount) * Decimal(rate)
        if not bug:
            break
        if not _is_half_cent(exact):
            continue
        seen = (Decimal(float(amount)) if akind == "f" else Decimal(amount)) * Decimal(float(rate))
        if seen < exact:
            break
    return {"fn": "apply_rate", "amount": _spec(akind, amount), "rate": _spec(rkind, rate)}


def _line(rng, bug):
    for _ in range(600):
        qty = rng.randint(1, 4)
        price = _price(rng, 2, 0, 200)
        rate = rng.choice(RATES + ["0"])
        rkind = "f" if bug else rng.choice("ffs")
        net = (Decimal(price) * qty).quantize(Decimal("0.01"))
        if not bug or (_is_half_cent(net * Decimal(rate)) and _below(rate)):
            break
    return {"price": _spec(rng.choice("ffsd"), price), "qty": qty, "rate": _spec(rkind, rate)}


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        bug = rng.random() < 0.5
        if r < 0.28:
            if bug:
                value = ["f", float(_signed(rng, _half(rng, True)))]
            elif rng.random() < 0.5:
                value = _spec(rng.choice("ffsd"), _signed(rng, _half(rng, False)))
            else:
                value = _spec(rng.choice("ffsd"), _price(rng, rng.choice([2, 3, 4])))
            out.append({"fn": "round_money", "value": value})
        elif r < 0.34:
            text = rng.choice(
                [_half(rng, False), _price(rng, 2), _price(rng, 1), "0.1", "0.3", "1.1", "2.675"]
            )
            out.append({"fn": "to_decimal", "value": ["f", float(text)]})
        elif r < 0.54:
            out.append(_rate_case(rng, bug))
        elif r < 0.7:
            out.append({"fn": "line_total", **_line(rng, bug)})
        elif r < 0.85:
            count = rng.randint(1, 3)
            lines = [_line(rng, bug and i == 0) for i in range(count)]
            rng.shuffle(lines)
            disc = rng.choice(["0", "0.05", "0.1", "0.15", "0.025", "0.075"])
            out.append({"fn": "invoice", "lines": lines, "discount": _spec(rng.choice("ffs"), disc)})
        elif r < 0.97:
            if bug:
                total = ["f", float(_half(rng, True))]
            else:
                total = _spec(rng.choice("ffsd"), rng.choice([_half(rng, False), _price(rng, 2)]))
            out.append({"fn": "split_evenly", "total": total, "parts": rng.randint(1, 6)})
        else:
            out.append({"fn": "round_money", "value": ["b", rng.random() < 0.5]})
    return out


def _arg(spec):
    kind, v = spec
    if kind == "d":
        return Decimal(v)
    return v  # float, str, int or bool as drawn


def _money(v):
    if isinstance(v, Decimal):
        return str(v)
    return ["not a Decimal", type(v).__name__, repr(v)]


def call(case):
    import centwise

    fn = case["fn"]
    if fn == "round_money":
        return _money(centwise.round_money(_arg(case["value"])))
    if fn == "to_decimal":
        v = centwise.to_decimal(_arg(case["value"]))
        return str(v.normalize()) if isinstance(v, Decimal) else _money(v)
    if fn == "apply_rate":
        return _money(centwise.apply_rate(_arg(case["amount"]), _arg(case["rate"])))
    if fn == "line_total":
        return _money(centwise.line_total(_arg(case["price"]), case["qty"], tax_rate=_arg(case["rate"])))
    if fn == "split_evenly":
        return [_money(p) for p in centwise.split_evenly(_arg(case["total"]), case["parts"])]
    inv = centwise.Invoice(discount_rate=_arg(case["discount"]))
    for i, line in enumerate(case["lines"]):
        inv.add(f"item{i}", _arg(line["price"]), line["qty"], tax_rate=_arg(line["rate"]))
    return [_money(inv.subtotal), _money(inv.tax), _money(inv.discount), _money(inv.total)]
