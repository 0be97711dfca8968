"""The spelling-equivalence rule of fact keys, on real-looking pairs, both directions."""

from __future__ import annotations

import pytest

from app.domain.facts.dedupe import key_tokens, keys_equivalent, merge_targets

# (key_a, value_a, key_b, value_b, equivalent?)
PAIRS = [
    # same tokens once filler is gone
    ("language", "Python", "preferred_language", "Rust", True),
    ("preferredLanguage", "Python", "language", "Python", True),
    ("favorite_color", "blue", "favoriteColor", "green", True),
    ("favourite-food", "ramen", "food", "sushi", True),
    ("current_employer", "Acme", "employer", "Globex", True),
    ("main_editor", "neovim", "editor", "helix", True),
    ("my_timezone", "CET", "timezone", "UTC+1", True),
    ("hobbies", "chess", "hobby", "chess, go", True),
    ("programming_languages", "Go", "programmingLanguage", "Go, Rust", True),
    ("Preferred Language", "Python", "preferred_language", "Python", True),
    ("default-shell", "zsh", "shell", "fish", True),
    # abbreviations and glued spellings
    ("lang", "Python", "language", "Rust", True),
    ("tz", "CET", "time_zone", "Europe/Berlin", True),
    ("os", "Debian", "operating_system", "Debian 12", True),
    ("user_name", "alice", "username", "alice42", True),
    ("e_mail", "a@example.org", "email", "b@example.org", True),
    ("dob", "1990-04-01", "birthday", "1 April 1990", True),
    # subset of tokens: the same fact only when the values agree
    ("editor", "neovim", "code_editor", "Neovim", True),
    ("city", "Berlin", "home_city", "berlin", True),
    ("editor", "neovim", "editor_theme", "gruvbox", False),
    ("version", "3.12", "python_version", "3.11", False),
    ("name", "Alice", "first_name", "Alice", True),
    ("name", "Alice", "last_name", "Smith", False),
    # distinguishing tokens differ: never, whatever the values
    ("home_city", "Berlin", "work_city", "Berlin", False),
    ("first_name", "Alice", "last_name", "Alice", False),
    ("python_version", "3.12", "node_version", "3.12", False),
    ("work_email", "a@acme.com", "personal_email", "a@acme.com", False),
    ("favorite_color", "blue", "favorite_food", "blue", False),
    ("github_username", "alice", "gitlab_username", "alice", False),
    ("primary_monitor", "Dell U2720Q", "secondary_monitor", "Dell U2720Q", False),
    ("editor", "neovim", "browser", "neovim", False),
    ("spouse_name", "Bob", "pet_name", "Rex", False),
]


@pytest.mark.parametrize(("ka", "va", "kb", "vb", "expected"), PAIRS)
def test_equivalence_table(ka: str, va: str, kb: str, vb: str, expected: bool) -> None:
    assert keys_equivalent(ka, va, kb, vb) is expected
    assert keys_equivalent(kb, vb, ka, va) is expected  # symmetric


def test_table_is_big_enough() -> None:
    assert len(PAIRS) >= 20
    assert sum(1 for p in PAIRS if not p[4]) >= 10


def test_tokens() -> None:
    assert key_tokens("preferredProgrammingLanguages") == {"programming", "language"}
    assert key_tokens("HTTPServerPort") == {"http", "server", "port"}
    assert key_tokens("default") == {"default"}  # all filler: kept as is
    assert key_tokens("addresses") == {"address"}
    assert key_tokens("status") == {"status"}


def test_merge_targets_hides_equivalents_only() -> None:
    others = [(1, "language", "Python"), (2, "home_city", "Berlin"), (3, "lang", "Go")]
    assert merge_targets("preferred_language", "Rust", others) == [1, 3]
    assert merge_targets("preferred_language", "Rust", []) == []
    # the written key itself (same row) is never a target
    assert merge_targets("language", "Rust", [(1, "language", "Python")]) == []


def test_generic_key_does_not_swallow_several_specific_ones() -> None:
    both = [(1, "home_city", "Berlin"), (2, "work_city", "Berlin")]
    assert merge_targets("city", "Berlin", both) == []
    assert merge_targets("city", "Berlin", both[:1]) == [1]
    # a more specific key hides the generic one
    assert merge_targets("home_city", "Berlin", [(7, "city", "berlin")]) == [7]
