"""Parsing of a single cron field (``*``, ``1-5``, ``*/15``, ``mon,wed``...)."""

MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun",
               "jul", "aug", "sep", "oct", "nov", "dec"]
DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def _value(token, lo, names):
    token = token.strip().lower()
    if names and token in names:
        return names.index(token) + lo
    if not token.isdigit():
        raise ValueError(f"invalid cron value: {token!r}")
    return int(token)


def parse_field(spec, lo, hi, names=None):
    """Return the set of values in ``[lo, hi]`` selected by ``spec``.

    ``names`` optionally maps symbolic names to values (index + ``lo``).
    """
    values = set()
    for part in spec.split(","):
        rng, slash, step_text = part.partition("/")
        step = int(step_text) if slash else 1
        if step < 1:
            raise ValueError(f"invalid step in {spec!r}")
        if rng == "*":
            start, end = lo, hi
        elif "-" in rng:
            first, last = rng.split("-", 1)
            start, end = _value(first, lo, names), _value(last, lo, names)
        else:
            start = _value(rng, lo, names)
            end = hi if slash else start
        if not lo <= start <= end <= hi:
            raise ValueError(f"value out of range in {spec!r} (allowed {lo}-{hi})")
        values.update(range(start, end + 1, step))
    return frozenset(values)
