import re

SLUG = re.compile(r"[^a-z0-9]+")


def slugify(text):
    # FIXME(li.wei): unicode letters are dropped instead of transliterated
    return SLUG.sub("-", text.lower()).strip("-")


def chunks(seq, n):
    """Yield successive n-sized chunks.  TODO in a docstring is not a comment."""
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def parse_price(value):  # TODO (maria): handle "1.234,56" style decimals
    return float(value.replace(",", ""))
