"""Generated check of pyfix-004: parse_qsl() / parse_qs() / get_first() on values holding "=".

Queries are built from key/value pairs as the docstrings describe them: an optional
leading "?", "+" for spaces, percent escapes, repeated keys, blank values ("a=" and
bare "a", dropped unless keep_blank_values), empty chunks, and sometimes a custom
separator. About half of the queries hold a value with a literal "=" (base64
padding, a nested query, "a=b=c", a value that is only "="), which the untouched
package cannot parse; the first "=" of a chunk separates key and value (the issue).
Keys are never empty and never contain "=" (the issue leaves them unspecified).
"""

KEYS = [
    "a",
    "b",
    "q",
    "state",
    "token",
    "next",
    "sig",
    "page",
    "redirect",
    "tag",
    "x",
    "user_id",
    "k",
    "lang",
    "my+key",
    "sp%20ace",
    "caf%C3%A9",
]
PLAIN = [
    "1",
    "2",
    "42",
    "xyz",
    "two+words",
    "hello%20world",
    "%2Fpath",
    "a%26b",
    "%3D",
    "caf%C3%A9",
    "true",
    "en-GB",
    "x.y",
    "%25",
    "~tilde",
    "a+b+c",
]
WITH_EQ = [
    "YWJjZA==",
    "dGVzdA=",
    "Zm9vYmFy==",
    "/search?q=a=b",
    "a=b=c",
    "=",
    "==",
    "x=",
    "=y",
    "https://h/?x=1",
    "k=v%3Dw",
    "a=1+b=2",
    "%3D=",
    "base64:QUJD==",
    "/cb?code=Q1c=&",
    "n=%20",
]


def _value(rng, with_eq):
    if with_eq:
        return rng.choice(WITH_EQ)
    return rng.choice(PLAIN)


def _query(rng, sep, with_eq):
    chunks = []
    n = rng.randint(1, 5)
    eq_at = rng.randrange(n) if with_eq else -1
    for i in range(n):
        key = rng.choice(KEYS)
        r = rng.random()
        if i == eq_at:
            value = _value(rng, True)
            if value.endswith("&"):  # the nested query's own "&" splits the chunk, as it should
                value = value[:-1] + sep
            chunks.append(f"{key}={value}")
        elif r < 0.12:
            chunks.append(f"{key}=")
        elif r < 0.2:
            chunks.append(key)
        elif r < 0.25:
            chunks.append("")
        else:
            chunks.append(f"{key}={_value(rng, False)}")
    query = sep.join(chunks)
    if rng.random() < 0.2:
        query = "?" + query
    return query


def cases(rng, n):
    out = []
    for _ in range(n):
        sep = "&" if rng.random() < 0.8 else ";"
        query = _query(rng, sep, rng.random() < 0.55)
        case = {"query": query, "separator": sep}
        r = rng.random()
        if r < 0.35:
            case.update(fn="parse_qsl", keep_blank_values=rng.random() < 0.4)
        elif r < 0.7:
            case.update(fn="parse_qs", keep_blank_values=rng.random() < 0.4)
        else:
            # get_first() has no separator argument: "&" queries only
            query = query.replace(";", "&") if sep == ";" else query
            body = query.lstrip("?")
            present = [c.split("=", 1)[0] for c in body.split("&") if c]
            key = rng.choice(present) if present and rng.random() < 0.85 else rng.choice(KEYS)
            if "%" in key or "+" in key:
                key = "state"
            case = {"fn": "get_first", "query": query, "key": key, "default": rng.choice(["-", "none", "0"])}
        out.append(case)
    return out


def call(case):
    from qsparse import get_first, parse_qs, parse_qsl

    fn = case["fn"]
    if fn == "get_first":
        return get_first(case["query"], case["key"], case["default"])
    if fn == "parse_qsl":
        pairs = parse_qsl(
            case["query"], keep_blank_values=case["keep_blank_values"], separator=case["separator"]
        )
        return [tuple(p) for p in pairs]
    result = parse_qs(case["query"], keep_blank_values=case["keep_blank_values"], separator=case["separator"])
    return {k: list(v) for k, v in result.items()}
