"""When two fact keys name the same thing — the spelling-equivalence rule (pure).

The extractor is an LLM: one pass writes `language`, the next `preferred_language`,
a third `preferredLanguage`. Those must end up as one fact. `home_city` and `work_city`
must not. The rule, applied only between keys of the same user and category:

1. **Tokenise** a key: split camelCase, then on anything that is not a letter or digit
   (`_`, `-`, space, `.`, `/` …), lower-case; expand a few abbreviations
   (`lang` → language, `tz` → timezone, `os` → operating system …); singularise
   trivially (`hobbies` → hobby, `languages` → language, `addresses` → address).
2. **Drop filler** tokens that qualify without naming anything: preferred, favorite,
   favourite, fav, current, user, my, main, primary, default, usual, the, of. If a key
   is nothing but filler (`default`), its tokens are kept as they are.
3. Two different keys are **equivalent** when
   * their filler-free token sets are equal (`language` ≡ `preferred_language`,
     `favoriteColor` ≡ `color`, `hobbies` ≡ `hobby`), or
   * their tokens glued together are equal (`time_zone` ≡ `timezone`, `e_mail` ≡
     `email`, `user_name` ≡ `username`), or
   * one token set is a proper subset of the other, the narrower key is *bare* (no
     filler was dropped from it), **and** the two values are equal ignoring case and
     whitespace (`editor` = "neovim" ≡ `code_editor` = "neovim", but `editor` =
     "neovim" is not `editor_theme` = "gruvbox"; `primary_monitor` is not
     `secondary_monitor` even with equal values: "primary" qualifies).

Keys whose distinguishing tokens differ (`home_city`/`work_city`, `first_name`/
`last_name`, `python_version`/`node_version`) are never equivalent, whatever the values:
neither set contains the other. Spelling variants of a word (`color`/`colour`) are not
recognised: equal tokens only.

`merge_targets` turns the rule into a merge decision for one write: which existing rows
the written row hides. One guard on top of the rule: a *generic* key never swallows
several *specific* ones — writing `city` = Berlin next to `home_city` = Berlin and
`work_city` = Berlin hides neither (which one would it be?).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "FILLER_TOKENS",
    "key_tokens",
    "keys_equivalent",
    "merge_targets",
    "normalise_value",
]

FILLER_TOKENS = frozenset(
    {
        "preferred",
        "prefered",
        "preference",
        "favorite",
        "favourite",
        "fav",
        "current",
        "user",
        "my",
        "main",
        "primary",
        "default",
        "usual",
        "the",
        "of",
    }
)

# Abbreviations an LLM uses interchangeably with the long form.
_ALIASES: dict[str, tuple[str, ...]] = {
    "lang": ("language",),
    "tz": ("timezone",),
    "os": ("operating", "system"),
    "dob": ("birthday",),
    "bday": ("birthday",),
    "birthdate": ("birthday",),
    "addr": ("address",),
    "num": ("number",),
    "tel": ("phone",),
}

_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_NON_WORD = re.compile(r"[^0-9a-zA-Z\u00c0-\uffff]+")
_SPACES = re.compile(r"\s+")


def _singular(token: str) -> str:
    if len(token) <= 3 or token.isdigit():
        return token
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith(("sses", "xes", "ches", "shes", "zes")):
        return token[:-2]
    if token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def _raw_tokens(key: str) -> list[str]:
    spaced = _CAMEL_2.sub(r"\1 \2", _CAMEL_1.sub(r"\1 \2", key))
    out: list[str] = []
    for part in _NON_WORD.split(spaced.lower()):
        if not part:
            continue
        out.extend(_ALIASES.get(part, (part,)))
    return [_singular(t) for t in out]


def key_tokens(key: str) -> frozenset[str]:
    """The filler-free, normalised token set of a key (the whole set if all filler)."""
    tokens = _raw_tokens(key)
    kept = [t for t in tokens if t not in FILLER_TOKENS]
    return frozenset(kept or tokens)


def _glued(key: str) -> str:
    return "".join(_raw_tokens(key))


def normalise_value(value: str) -> str:
    return _SPACES.sub(" ", value.strip()).casefold()


def keys_equivalent(key_a: str, value_a: str, key_b: str, value_b: str) -> bool:
    """True when `key_a` and `key_b` (same user, same category) name the same fact.

    Symmetric. Identical keys (ignoring case and surrounding space) are equivalent.
    """
    if key_a.strip().casefold() == key_b.strip().casefold():
        return True
    a, b = key_tokens(key_a), key_tokens(key_b)
    if not a or not b:
        return False
    if a == b or _glued(key_a) == _glued(key_b):
        return True
    if a < b or b < a:
        # The narrower key must be bare: `primary_monitor` ({monitor} once `primary` is
        # dropped) is qualified, and may be the opposite of `secondary_monitor`.
        narrower = key_a if a < b else key_b
        bare = len(_raw_tokens(narrower)) == len(a if a < b else b)
        return bare and normalise_value(value_a) == normalise_value(value_b)
    return False


def merge_targets(key: str, value: str, others: Iterable[tuple[int, str, str]]) -> list[int]:
    """Ids among `others` (`(id, key, value)` live rows of the same user and category)
    that the row just written under `key` = `value` hides."""
    mine = key_tokens(key)
    hidden: list[int] = []
    more_specific: list[int] = []
    for row_id, other_key, other_value in others:
        if other_key == key or not keys_equivalent(key, value, other_key, other_value):
            continue
        if mine < key_tokens(other_key):
            more_specific.append(row_id)
        else:
            hidden.append(row_id)
    if len(more_specific) == 1:
        hidden.extend(more_specific)
    return hidden
