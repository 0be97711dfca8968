"""The title's clean-up and the fallback of sessions named after their first exchange."""

from __future__ import annotations

from app.domain.sessions.naming import TITLE_MAX_CHARS, clean_title, fallback_title


def test_clean_title_keeps_one_line_without_quotes_or_label() -> None:
    assert clean_title('"Trip to Lisbon"') == "Trip to Lisbon"
    assert clean_title("Title: «Deploy the API».\nBecause the user asked…") == "Deploy the API"
    assert clean_title("<think>hmm</think>\n\n  Port   settings  ") == "Port settings"
    assert clean_title("- Garden plans") == "Garden plans"


def test_clean_title_refuses_what_is_not_a_title() -> None:
    assert clean_title("") is None
    assert clean_title('  "" ... ') is None
    assert clean_title(" ".join(["word"] * 30)) is None  # an answer, not a title


def test_clean_title_is_capped_at_a_word() -> None:
    title = clean_title("Supercalifragilistic " * 5)
    assert title is not None and len(title) <= TITLE_MAX_CHARS and not title.endswith(" ")


def test_fallback_is_the_first_words_collapsed_and_capped() -> None:
    assert fallback_title("  how do I\n\n deploy   the api to prod today please") == (
        "how do I deploy the api"
    )
    assert len(fallback_title("x" * 500)) <= TITLE_MAX_CHARS
    assert fallback_title("   ") == "New session"
