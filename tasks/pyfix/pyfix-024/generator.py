"""Generated check of pyfix-024: typed env accessors keep falsy values (0, false, off...).

Each case reads one variable through env_int / env_float / env_bool / env_str / env_list,
or a whole WorkerSettings through from_env(), from a drawn environ mapping. Values are
falsy-but-set (where the bug shows), ordinary values, unset / empty / whitespace (the
README's fall back to the default) and unparsable text (SettingError). Results carry their
type name so that False and 0, or 0 and 0.0, are told apart. A list value that parses to
no items (e.g. ",") is never drawn: the README does not say whether that is "empty".
"""

NAMES = ["RETRIES", "PORT", "DEBUG", "TIMEOUT", "LEVEL", "WORKERS", "VERBOSE", "RATE", "FLAG", "MODE"]
MISSING = [None, "", " ", "   ", "\t"]

INT_FALSY = ["0", " 0 ", "-0", "+0", "00", "000", "0\n"]
INT_TRUTHY = ["5", "-3", " 42 ", "1000", "7", "-1", "12"]
INT_BAD = ["eighty", "1.5", "0x10", "zero", "1e3"]

FLOAT_FALSY = ["0", "0.0", "0e0", "-0.0", ".0", "0.000", " 0.0 "]
FLOAT_TRUTHY = ["2.5", "-1.25", "1e3", "30", " 0.5 ", "12.75"]
FLOAT_BAD = ["abc", "1,5", "zero", "1.2.3"]

BOOL_FALSY = ["0", "false", "FALSE", "False", "no", "NO", "off", "Off", " no ", " false "]
BOOL_TRUTHY = ["1", "true", "TRUE", "yes", "Yes", "on", "ON", " on "]
BOOL_BAD = ["maybe", "2", "t", "nope", "enabled"]

STRS = ["0", "api", " worker ", "false", "default", "q-1"]
LISTS = ["a, b,c", "x", " tag1 , tag2 ", "0", "a,,b", "false, 0"]


def _typed(v):
    if isinstance(v, list):
        return ["list", [_typed(x) for x in v]]
    return [type(v).__name__, v]


def _single(rng, kind):
    falsy, truthy, bad, defaults = {
        "int": (INT_FALSY, INT_TRUTHY, INT_BAD, [3, 8080, 5, -1, 10, None]),
        "float": (FLOAT_FALSY, FLOAT_TRUTHY, FLOAT_BAD, [30.0, 1.5, 2.0, -4.0, None]),
        "bool": (BOOL_FALSY, BOOL_TRUTHY, BOOL_BAD, [True, True, True, False, None]),
    }[kind]
    r = rng.random()
    if r < 0.55:
        raw = rng.choice(falsy)
    elif r < 0.77:
        raw = rng.choice(truthy)
    elif r < 0.9:
        raw = rng.choice(MISSING)
    else:
        raw = rng.choice(bad)
    name = rng.choice(NAMES)
    environ = {"OTHER": rng.choice(["1", "0", "x"])}
    if raw is not None:
        environ[name] = raw
    default = rng.choice(defaults)
    if raw in MISSING and default is None:
        default = defaults[0]
    case = {"fn": "env_" + kind, "name": name, "environ": environ}
    if default is not None:
        case["default"] = default
    return case


def _settings(rng):
    prefix = rng.choice(["WORKER_", "WORKER_", "APP_"])
    environ = {}
    pools = {
        "QUEUE": ["high", "default", "", " ", "0"],
        "CONCURRENCY": INT_FALSY + INT_TRUTHY + ["", " "],
        "RETRIES": INT_FALSY + INT_FALSY + INT_TRUTHY + [""],
        "TIMEOUT_S": FLOAT_FALSY + FLOAT_TRUTHY + [""],
        "DEBUG": BOOL_FALSY + BOOL_FALSY + BOOL_TRUTHY + [" "],
        "TAGS": ["a,b", "x", "", "  ", "fast, slow"],
    }
    keys = rng.sample(sorted(pools), rng.randint(1, 4))
    for key in keys:
        environ[prefix + key] = rng.choice(pools[key])
    if rng.random() < 0.3:
        environ["OTHER_RETRIES"] = "9"
    return {"fn": "settings", "prefix": prefix, "environ": environ}


def cases(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.24:
            out.append(_single(rng, "int"))
        elif r < 0.38:
            out.append(_single(rng, "float"))
        elif r < 0.62:
            out.append(_single(rng, "bool"))
        elif r < 0.85:
            out.append(_settings(rng))
        elif r < 0.92:
            name = rng.choice(NAMES)
            raw = rng.choice(STRS + MISSING)
            environ = {} if raw is None else {name: raw}
            out.append(
                {"fn": "env_str", "name": name, "environ": environ, "default": rng.choice(["q", "main"])}
            )
        else:
            name = rng.choice(NAMES)
            raw = rng.choice(LISTS + MISSING)
            environ = {} if raw is None else {name: raw}
            out.append({"fn": "env_list", "name": name, "environ": environ, "default": ["d"]})
    return out


def call(case):
    import envtyped

    environ = dict(case["environ"])
    if case["fn"] == "settings":
        s = envtyped.WorkerSettings.from_env(environ=environ, prefix=case["prefix"])
        return [
            _typed(getattr(s, f)) for f in ("queue", "concurrency", "retries", "timeout_s", "debug", "tags")
        ]
    fn = getattr(envtyped, case["fn"])
    if "default" in case:
        default = case["default"]
        if isinstance(default, list):
            default = list(default)
        value = fn(case["name"], default=default, environ=environ)
    else:
        value = fn(case["name"], environ=environ)
    return _typed(value)
