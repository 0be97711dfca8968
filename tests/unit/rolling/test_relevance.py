from types import SimpleNamespace

from app.domain.rolling.relevance import (
    is_general_rule,
    relevant_summary,
    request_texts,
    terms,
)

SUMMARY = {
    "key_decisions": [
        "Do: answer in English",
        "Don't: restart the nginx proxy on fridays",
        "Do: keep invoices in the finance folder",
    ],
    "past_discussions": [f"topic {i}: deployment of service s{i}" for i in range(10)]
    + ["paid invoice INV-2291 for storage"],
    "current_discussion": "tuning nginx timeouts",
}


def test_keeps_general_rules_and_overlapping_entries_in_order() -> None:
    doc = relevant_summary(SUMMARY, ["how do I restart nginx?"])
    assert doc == {
        "key_decisions": ["Do: answer in English", "Don't: restart the nginx proxy on fridays"],
        "past_discussions": [],
        "current_discussion": "tuning nginx timeouts",
    }


def test_past_discussions_bounded_best_kept_in_stored_order() -> None:
    doc = relevant_summary(SUMMARY, ["deploy service s7 and s2"], max_past=3)
    assert doc is not None
    # s7 and s2 share two words, the rest one: s7, s2 and the newest one-word match
    assert doc["past_discussions"] == [
        "topic 2: deployment of service s2",
        "topic 7: deployment of service s7",
        "topic 9: deployment of service s9",
    ]


def test_nothing_relevant_is_none() -> None:
    summary = {**SUMMARY, "key_decisions": ["Don't: restart the nginx proxy on fridays"]}
    assert relevant_summary(summary, ["recommend a hiking trail"]) is None
    assert relevant_summary(None, ["nginx"]) is None
    assert relevant_summary({"key_decisions": []}, ["nginx"]) is None


def test_no_words_to_judge_by_keeps_everything() -> None:
    doc = relevant_summary(SUMMARY, ["?", "the"])
    assert doc is not None and len(doc["past_discussions"]) == 11


def test_stems_and_cjk_pairs() -> None:
    assert "invoice" in terms("Invoices") and "deploy" in terms("deploying")
    doc = relevant_summary(
        {"past_discussions": ["討論了資料庫備份的排程"], "key_decisions": []},
        ["資料庫什麼時候備份？"],
    )
    assert doc is not None and doc["past_discussions"] == ["討論了資料庫備份的排程"]
    assert is_general_rule("Do: 一律用繁體中文回答") and is_general_rule("Do: reply in markdown")
    assert not is_general_rule("Don't: restart the nginx proxy")


def test_request_texts_adds_the_last_user_message() -> None:
    recent = [
        SimpleNamespace(role="user", content="the nginx port?"),
        SimpleNamespace(role="assistant", content="8098"),
    ]
    assert request_texts("and the other one?", recent) == ["and the other one?", "the nginx port?"]
    assert request_texts(None, []) == []


def test_an_acknowledgement_is_no_content_word_and_keeps_everything() -> None:
    # "ok?" names no topic: the request cannot be judged, the whole summary rides
    for reply in ("ok?", "Okay, thanks!", "cheers", "好的", "謝謝", "ок, спасибо"):
        doc = relevant_summary(SUMMARY, [reply])
        assert doc is not None and len(doc["past_discussions"]) == 11, reply
        assert doc["current_discussion"] == "tuning nginx timeouts", reply
    # an acknowledgement with a topic is judged by the topic
    doc = relevant_summary(SUMMARY, ["ok, and the nginx proxy?"])
    assert doc is not None and doc["past_discussions"] == []
    assert doc["current_discussion"] == "tuning nginx timeouts"
    # the window's last user message still names the topic of a bare "ok"
    doc = relevant_summary(SUMMARY, ["ok", "recommend a hiking trail"])
    assert doc is not None and (doc["past_discussions"], doc["current_discussion"]) == ([], "")
