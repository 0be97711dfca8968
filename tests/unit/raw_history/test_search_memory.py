"""`search_memory`: what the raw search remembers between searches (walkers, common terms)."""

from app.domain.raw_history.search_cache import CommonTerms
from app.domain.raw_history.search_cache import Walkers as _Walkers


def test_remembers_the_last_users_seen_past_the_line() -> None:
    w = _Walkers(2)
    w.note("a", True)
    w.note("b", True)
    w.note("a", True)  # a is the most recent again
    w.note("c", True)  # b, the least recent, goes
    assert (w.walks("a"), w.walks("b"), w.walks("c")) == (True, False, True)


def test_a_user_seen_below_the_line_is_forgotten() -> None:
    w = _Walkers(4)
    w.note("a", True)
    w.note("a", False)
    w.note("z", False)  # never seen past it: nothing to forget
    assert not w.walks("a") and not w.walks("z")


def test_common_terms_answer_for_their_version_only() -> None:
    c = CommonTerms(2)
    c.put("u", "kato", (1, 7), ["a", "b"])
    assert c.get("u", "kato", (1, 7)) == ("a", "b")
    assert c.get("u", "kato", (1, 8)) is None  # the user's chunks changed
    assert c.get("u", "kato", (2, 7)) is None  # another database
    assert c.get("v", "kato", (1, 7)) is None
    c.put("u", "zeb", (1, 7), ["c"])
    c.get("u", "kato", (1, 7))  # kato is the most recent again
    c.put("u", "new", (1, 7), ["d"])  # zeb, the least recent, goes
    assert c.get("u", "zeb", (1, 7)) is None and c.get("u", "kato", (1, 7)) == ("a", "b")
