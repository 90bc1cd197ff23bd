"""Generated check of pyfix-005: filters see the looked-up object; escaping applies to the final value.

Each case is a template of literal text and one to three `{{ name|filter|... }}` tags,
rendered over a context of strings (often with characters HTML escaping changes), lists
and numbers, with autoescape on or off. Filter chains are drawn to suit the type of the
value at each step (built-in filters and a fixed set of custom filters defined in
`call`), so every chain is meaningful by the README: filters apply left to right to the
looked-up value, and the final value is escaped unless it is a SafeString.
Not drawn (unspecified): a filter after `safe`, `safe` on a non-string, filters on
undefined names, attribute lookups on objects, filters on a SafeString from the context.
"""

STRINGS = [
    "Tom & Jerry",
    "<b>hi</b>",
    '"5" < 6',
    "  padded <x>  ",
    "O'Reilly & sons",
    "plain text",
    "a&b",
    "ada lovelace",
    "fish & chips",
    "x > y",
    "café <crème>",
    "R&D",
    "it's",
    "A<B",
]
LISTS = [
    ["a", "b", "c"],
    ["<a>", "b"],
    ["Tom", "Jerry"],
    ["x & y"],
    [1, 2, 3],
    ["o'k", '"q"'],
    ["one"],
    ["r&b", "jazz", "pop", "soul"],
    [10, 20],
]
NUMBERS = [1234.5, 3, 0.25, 1000000, 42, 7.125, 99.9]
NAMES = ["name", "body", "title", "note", "tags", "items", "price", "count"]

# filter -> (type it accepts, type it returns); custom ones are defined in call()
FILTERS = {
    "upper": ("str", "str"),
    "lower": ("str", "str"),
    "title": ("str", "str"),
    "strip": ("str", "str"),
    "length": ("str list", "num"),
    "join": ("list", "str"),
    "wrap": ("str num", "str"),
    "first": ("list", "elem"),
    "reverse": ("str list", "same"),
    "double": ("str list num", "same"),
    "money": ("num", "str"),
    "count": ("list", "num"),
}


def _value(rng):
    r = rng.random()
    if r < 0.55:
        return "str", rng.choice(STRINGS)
    if r < 0.85:
        return "list", list(rng.choice(LISTS))
    return "num", rng.choice(NUMBERS)


def _chain(rng, kind, value):
    chain = []
    for _ in range(rng.choice([0, 0, 0, 1, 1, 1, 2, 3])):
        options = sorted(f for f, (accepts, _) in FILTERS.items() if kind in accepts.split())
        if not options:
            break
        f = rng.choice(options)
        chain.append(f)
        result = FILTERS[f][1]
        if result == "elem":
            value = value[0]
            kind = "str" if isinstance(value, str) else "num"
        elif result != "same":
            kind = result
    if kind == "str" and rng.random() < 0.25:
        chain.append("safe")
    return chain


def cases(rng, n):
    out = []
    for _ in range(n):
        context, tags, safe_names = {}, [], []
        for name in rng.sample(NAMES, rng.choice([1, 1, 2, 2, 3])):
            kind, value = _value(rng)
            expr = name
            if rng.random() < 0.25:  # dotted lookup into a dict
                context[name] = {"v": value, "other": "z"}
                expr = name + ".v"
            else:
                context[name] = value
            chain = _chain(rng, kind, value)
            if kind == "str" and expr == name and not chain and rng.random() < 0.4:
                safe_names.append(name)  # a SafeString in the context, rendered as is
            tags.append("{{ " + "|".join([expr] + chain) + " }}")
        if rng.random() < 0.15:
            tags.append("{{ missing }}")
        glue = ["<p>", " - ", ": ", "</p>", " & ", " ", "\n", "[", "]"]
        source = rng.choice(["", "<li>", "Hi "]) + "".join(t + rng.choice(glue) for t in tags)
        out.append(
            {
                "source": source,
                "context": context,
                "autoescape": rng.random() < 0.75,
                "safe_names": safe_names,
            }
        )
    return out


def call(case):
    from tinytemplate import SafeString, Template

    custom = {
        "wrap": lambda v: f"<{v}>",
        "first": lambda v: v[0],
        "reverse": lambda v: v[::-1],
        "double": lambda v: v * 2,
        "money": lambda v: f"${v:,.2f}",
        "count": lambda v: sum(1 for _ in v),
    }
    context = {k: (SafeString(v) if k in case["safe_names"] else v) for k, v in case["context"].items()}
    return Template(case["source"], autoescape=case["autoescape"], filters=custom).render(context)
