"""URL slug helpers."""

import re
import unicodedata

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def _ascii_fold(text):
    """Decompose accented characters and drop anything that is not ASCII."""
    normalized = unicodedata.normalize("NFKD", text)
    return normalized.encode("ascii", "ignore").decode("ascii")


def slugify(text, separator="-", max_length=None):
    """Turn *text* into a URL-friendly slug.

    Accents are folded to ASCII, everything is lower-cased and every run of
    characters that is not a letter or a digit becomes a single *separator*.
    Leading and trailing separators are removed.

    If *max_length* is given the slug is shortened to at most that many
    characters, cutting at a separator boundary when possible so that words
    are not chopped in half.
    """
    if not separator:
        raise ValueError("separator must be a non-empty string")
    text = _ascii_fold(text).lower()
    slug = _NON_ALNUM.sub(separator, text).strip("-")
    if max_length is not None and len(slug) > max_length:
        cut = slug[:max_length]
        if slug[max_length:].startswith(separator) or separator not in cut:
            slug = cut
        else:
            slug = cut.rsplit(separator, 1)[0]
        slug = slug.strip(separator)
    return slug


def unique_slug(text, existing, separator="-", max_length=None):
    """Return a slug for *text* that is not contained in *existing*.

    When the plain slug is taken, ``<slug><separator>2``, ``<slug><separator>3``
    ... are tried in turn.
    """
    base = slugify(text, separator=separator, max_length=max_length)
    if base not in existing:
        return base
    counter = 2
    while True:
        candidate = f"{base}{separator}{counter}"
        if candidate not in existing:
            return candidate
        counter += 1
