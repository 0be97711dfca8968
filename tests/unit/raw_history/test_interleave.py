"""Raw hits shown together, best lines first (`window.interleave_windows`, `format_hits`)."""

from __future__ import annotations

from app.domain.kernel.hits import MemoryHit
from app.domain.raw_history.ranking import Candidate, line_spans, rank_chunks
from app.domain.raw_history.window import GAP, Focused, interleave_windows
from app.domain.search.render import format_hits

A = "User: a0 intro, who is it?\nAssistant: a1 is the port 8099?\nUser: a2 thanks, and the host?\nAssistant: a3 later the host?\nUser: a4 bye"
B = "User: b0 hello\nAssistant: b1 the nginx config?\nUser: b2 ok"


def focus(text: str, *numbers: int) -> list[tuple[int, int]]:
    spans = line_spans(text)
    return [spans[n] for n in numbers]


def test_best_lines_of_all_texts_come_first() -> None:
    items = [Focused(A, focus(A, 1, 3), (0.9, 0.4)), Focused(B, focus(B, 1), (0.7,))]
    runs = interleave_windows(items, 10_000)
    assert [(r.item, r.first) for r in runs] == [(0, True), (1, True), (0, False)]
    assert runs[0].body == "Assistant: a1 is the port 8099?\nUser: a2 thanks, and the host?"
    assert runs[1].body == "Assistant: b1 the nginx config?\nUser: b2 ok"
    assert runs[2].body == "Assistant: a3 later the host?\nUser: a4 bye"


def test_same_text_picks_join_with_a_gap_and_lines_are_not_repeated() -> None:
    # line 2 was shown as line 1's neighbour: as a focus line it only adds line 3
    runs = interleave_windows([Focused(A, focus(A, 1, 2, 4), (0.9, 0.8, 0.7))], 10_000)
    assert len(runs) == 1
    assert runs[0].body.split("\n") == [
        "Assistant: a1 is the port 8099?",
        "User: a2 thanks, and the host?",
        "Assistant: a3 later the host?",
        "User: a4 bye",
    ]
    runs = interleave_windows([Focused(A, focus(A, 3, 0), (0.9, 0.5))], 10_000)
    assert runs[0].body.split("\n") == [
        "Assistant: a3 later the host?",
        "User: a4 bye",
        GAP,
        "User: a0 intro, who is it?",
        "Assistant: a1 is the port 8099?",
    ]


def test_budget_drops_the_neighbour_then_the_line() -> None:
    items = [Focused(A, focus(A, 1, 3), (0.9, 0.4))]
    only_line = len("Assistant: a1 is the port 8099?") + 1
    runs = interleave_windows(items, only_line)
    assert [r.body for r in runs] == ["Assistant: a1 is the port 8099?"]
    assert interleave_windows(items, 5) == []


def test_a_long_line_is_cut_to_its_best_window() -> None:
    long = "User: " + "filler words here " * 200 + "the vault key rotates nightly " + "more " * 300
    runs = interleave_windows(
        [Focused(long, focus(long, 0), (1.0,))], 10_000, ["vault"], line_chars=200
    )
    assert len(runs) == 1 and "vault key rotates" in runs[0].body
    assert len(runs[0].body) <= 210


def test_format_hits_interleaves_ranked_raw_hits() -> None:
    weights = {"port": 2.0, "nginx": 1.5, "host": 1.0}
    cands = [Candidate("a", A), Candidate("b", B)]
    ranked = rank_chunks(cands, weights, k=5, min_similarity=0.55, context_weight=0.0)
    assert [r.key for r in ranked] == ["a", "b"]
    text = {"a": A, "b": B}
    hits = [
        MemoryHit(
            "raw",
            text[r.key],
            session_id="s1",
            start_seq=n * 10,
            end_seq=n * 10 + 4,
            chunk_id=r.key,
            rank=r.score,
            matched_terms=r.terms,
            focus=r.focus,
            focus_scores=r.focus_scores,
        )
        for n, r in enumerate(ranked)
    ]
    out = format_hits("port nginx host", "raw", hits).split("\n")
    assert out[2] == "1. raw · session s1 · turns 0–4"
    assert out[3:5] == ["   Assistant: a1 is the port 8099?", "   User: a2 thanks, and the host?"]
    assert out[5] == "2. raw · same session · turns 10–14"  # the hit before is from s1 too
    assert out[6] == "   Assistant: b1 the nginx config?"
    assert "1. (continued)" in out
    assert out.index("1. (continued)") > 5
    assert "Assistant: a3 later the host?" in out[out.index("1. (continued)") + 1]


def test_the_next_line_comes_only_when_it_answers() -> None:
    chat = (
        "User: c0 the port is 8099\nAssistant: c1 noted\n"
        "User: c2 which port for nginx?\nAssistant: c3 8080\n"
        "Assistant: c4 checking the nginx port\nTool result (shell): c5 listen 8080;\nUser: c6 ok"
    )
    spans = line_spans(chat)
    runs = interleave_windows([Focused(chat, [spans[0], spans[2], spans[4]], (0.9, 0.8, 0.7))])
    assert runs[0].body.split("\n") == [
        "User: c0 the port is 8099",  # a statement: its reply is not shown
        GAP,
        "User: c2 which port for nginx?",  # a question: its answer is
        "Assistant: c3 8080",
        "Assistant: c4 checking the nginx port",  # a tool call: its result is
        "Tool result (shell): c5 listen 8080;",
    ]


LIST = (
    "User: l0 ideas for jobs at home?\n"
    "Assistant: l1 Here are some:\n1. Tutor\n2. Writer\n3. Transcriptionist\n4. Bookkeeper\n"
    "User: l6 thanks\nAssistant: l7 welcome"
)


def test_a_focus_line_brings_its_whole_message_in_order_when_asked() -> None:
    spans = line_spans(LIST)
    # the third item scores best, then the second: shown out of order without messages
    item = Focused(LIST, [spans[4], spans[3]], (0.9, 0.8))
    plain = interleave_windows([item], 10_000)
    assert plain[0].body.split("\n") == ["3. Transcriptionist", GAP, "2. Writer"]
    whole = interleave_windows([item], 10_000, message_chars=3000)
    assert whole[0].body.split("\n") == [
        "Assistant: l1 Here are some:",
        "1. Tutor",
        "2. Writer",
        "3. Transcriptionist",
        "4. Bookkeeper",
    ]
    # a message past `message_chars` is shown as before
    assert interleave_windows([item], 10_000, message_chars=40) == plain


def test_a_question_brings_the_whole_answer() -> None:
    spans = line_spans(LIST)
    runs = interleave_windows([Focused(LIST, [spans[0]], (0.9,))], 10_000, message_chars=3000)
    assert runs[0].body.split("\n")[0] == "User: l0 ideas for jobs at home?"
    assert runs[0].body.split("\n")[-1] == "4. Bookkeeper"


def test_whole_messages_are_for_all_but_the_users_questions_about_themselves() -> None:
    spans = line_spans(LIST)
    hit = MemoryHit(
        source_type="raw", text=LIST, session_id="s1", focus=(spans[4],), focus_scores=(0.9,)
    )
    about_me = format_hits("which jobs at home did I list", "raw", [hit])
    assert "1. Tutor" not in about_me and "3. Transcriptionist" in about_me
    for query in ("which jobs at home did you list", "which jobs at home did Ann list"):
        shown = format_hits(query, "raw", [hit])
        assert "1. Tutor\n" in shown and "4. Bookkeeper" in shown
