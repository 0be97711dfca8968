from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.kernel.hits import MemoryHit
from app.domain.raw_history.ranking import (
    Candidate,
    Ranked,
    first_person,
    idf,
    line_spans,
    rank_chunks,
    segment_spans,
    spread,
    stem_term,
    term_hits,
    term_pattern,
    user_lines,
)
from app.domain.raw_history.window import line_windows
from app.domain.search.render import format_hits, hit_excerpt, keys_shown


def chunk(lines: list[str]) -> str:
    return "\n\n".join(lines)


def test_line_spans_skip_blank_lines() -> None:
    text = "User: a\n\n  \nAssistant: b\n"
    assert [text[a:b] for a, b in line_spans(text)] == ["User: a", "Assistant: b"]


def test_segments_pack_whole_lines_and_cut_long_ones() -> None:
    lines = [f"User: line {i} " + "word " * 30 for i in range(12)]
    text = chunk(lines)
    segs = segment_spans(text, 500)
    assert all(b - a <= 500 for a, b in segs)
    covered = "".join(text[a:b] for a, b in segs)
    assert covered.replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")
    for a, _b in segs:  # whole lines: a segment starts at a line start
        assert a == 0 or text[a - 1] == "\n"
    long = "x " * 2000
    pieces = segment_spans(long, 300)
    assert all(b - a <= 300 for a, b in pieces) and len(pieces) >= 13


def test_idf_weighs_common_terms_down() -> None:
    assert idf(1, 100) > idf(50, 100) > idf(100, 100) > 0
    assert math.isfinite(idf(0, 0)) and idf(0, 0) > 0  # no chunks: never a division by zero


def test_term_pattern_prefix_and_whole_words() -> None:
    pat = term_pattern(["paint", "go", "порт"])
    assert pat is not None
    found = [m.group(0).lower() for m in pat.finditer("Painting, repaint; go gone порта")]
    assert found == ["paint", "go", "порт"]
    assert term_pattern([]) is None


def test_rank_by_best_line_with_idf() -> None:
    # "caroline" is in every chunk (weight ~0); "adoption" decides
    a = chunk(
        [
            "User: Caroline: nice weather today",
            "Assistant: Melanie: sure is",
            "User: Caroline: I researched adoption agencies last week",
            "Assistant: Melanie: that is wonderful news",
        ]
    )
    b = chunk(["User: Caroline: hi", "Assistant: Melanie: hello Caroline, Caroline!"])
    weights = {"caroline": idf(2, 2), "adoption": idf(1, 2)}
    ranked = rank_chunks([Candidate("b", b), Candidate("a", a)], weights, k=5, min_similarity=0.55)
    assert [r.key for r in ranked] == ["a", "b"]
    best = ranked[0]
    start, end = best.focus[0]
    assert "adoption" in a[start:end]
    assert best.terms == ("caroline", "adoption") and best.similarity is None


def test_vector_segments_rank_and_gate() -> None:
    text = chunk(["User: the garden is green", "Assistant: we adopted a turtle named Shelly"])
    second = line_spans(text)[1]
    near = Candidate("near", text, segments=[(0, second[0] - 2, 0.2), (second[0], len(text), 0.8)])
    far = Candidate("far", "User: quantum chromodynamics", segments=[(0, 28, 0.3)])
    ranked = rank_chunks([far, near], {}, k=5, min_similarity=0.55)
    # no term matched anywhere: only a segment past the cutoff qualifies a chunk
    assert [r.key for r in ranked] == ["near"]
    assert ranked[0].focus[0] == second and ranked[0].similarity == 0.8


def test_breadcrumbs_count_as_a_line() -> None:
    c = Candidate("k", "User: something unrelated", keys=("server_port",))
    ranked = rank_chunks([c], {"server": 1.0}, k=1, min_similarity=0.55)
    assert ranked and ranked[0].terms == ("server",) and ranked[0].focus == ()


def test_line_windows_best_first_with_neighbours() -> None:
    lines = [f"User: filler line {i:02d} " + "x" * 40 for i in range(30)]
    lines[20] = "User: the vault rotation runs every 90 days"
    lines[5] = "Assistant: vault mentioned once"
    text = chunk(lines)
    spans = line_spans(text)
    out = line_windows(text, [spans[20], spans[5]], 1200, before=1, after=1)
    first, second = out.split("\n…\n")
    assert "line 19" in first and "vault rotation" in first and "line 21" in first
    assert "vault mentioned once" in second
    assert out.startswith("… ") and out.endswith(" …")
    # a tight budget keeps the best line and drops neighbours first
    tight = line_windows(text, [spans[20], spans[5]], 60, before=1, after=1)
    assert "vault rotation" in tight and "filler" not in tight
    # adjacent focus lines merge into one window
    merged = line_windows(text, [spans[20], spans[21]], 1200, before=0, after=0)
    assert GAP_LINE not in merged and "line 21" in merged


GAP_LINE = "\n…\n"


def test_line_windows_long_line_and_no_focus() -> None:
    text = "User: " + "word " * 500 + "needle here " + "word " * 500
    span = line_spans(text)[0]
    out = line_windows(text, [span], 200, ["needle"])
    assert "needle" in out and len(out) <= 204
    assert line_windows("User: head text", [], 100) == "User: head text"


def test_format_hits_uses_focus_and_keys_first_matching() -> None:
    text = chunk([f"User: small talk {i}" for i in range(40)] + ["Assistant: port 8098 it is"])
    focus = (line_spans(text)[-1],)
    hit = MemoryHit("raw", text, session_id="s1", start_seq=1, end_seq=41, focus=focus)
    assert hit_excerpt(hit, ["port"], 200).endswith("Assistant: port 8098 it is")
    out = format_hits("port", "raw", [hit])
    assert "port 8098" in out and "small talk 0" not in out
    keys = ("alpha", "beta", "server_port", "8098")
    assert keys_shown(keys, ["port"]) == "server_port, alpha, beta, 8098"
    many = tuple(f"/very/long/path/number/{i:03d}/file.conf" for i in range(12))
    shown = keys_shown(many, [])
    assert len(shown) <= 200 and shown.startswith(many[0])


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("activities", "activit"),
        ("painting", "paint"),
        ("painted", "paint"),
        ("dancing", "danc"),
        ("dance", "danc"),
        ("running", "run"),
        ("classes", "class"),
        ("glass", "glass"),
        ("kids", "kid"),
        ("studied", "stud"),
        ("tournaments", "tournament"),
        ("festival", "festival"),
        ("was", "was"),
        ("used", "used"),
        ("порта", "порта"),
        ("h264", "h264"),
    ],
)
def test_stem_term(word: str, stem: str) -> None:
    assert stem_term(word) == stem
    pattern = term_pattern([stem])
    assert pattern is not None and pattern.search(f"we said {word} once")  # a word prefix


def test_a_line_next_to_a_match_outranks_a_lone_line() -> None:
    # the answer names nothing of the question; it sits after the line that does
    lines = [
        "User: what tournament did you win?",
        "Assistant: the regional chess open, in May",
        "User: unrelated chatter about lunch",
        "Assistant: more unrelated chatter",
    ]
    text = chunk(lines)
    spans = line_spans(text)
    weights = {"tournament": 2.0}
    plain = rank_chunks([Candidate("c", text)], weights, k=1, min_similarity=0.55, context_weight=0)
    assert plain[0].focus == (spans[0],)  # only the matching line scores without context
    ranked = rank_chunks([Candidate("c", text)], weights, k=1, min_similarity=0.55)
    assert ranked[0].focus[:2] == (spans[0], spans[1])
    assert len(ranked[0].focus_scores) == len(ranked[0].focus)
    assert ranked[0].focus_scores[0] > ranked[0].focus_scores[1] > 0


def test_vector_floor_follows_the_candidates() -> None:
    # an embedder whose unrelated texts score ~0.7 (E5-like): the better segment still
    # decides, as it would at MiniLM's ~0.1
    a = Candidate("a", "User: alpha", segments=[(0, 11, 0.74)])
    b = Candidate("b", "User: beta", segments=[(0, 10, 0.90)])
    ranked = rank_chunks([a, b], {}, k=2, min_similarity=0.55)
    assert [r.key for r in ranked] == ["b", "a"]
    assert ranked[0].score > 0.4 and ranked[1].score == 0.0


_ALPHABET = "abcportéжё_-./ 0123\nAB"


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=_ALPHABET, max_size=80),
    terms=st.lists(st.text(alphabet="abcportéжё0123", min_size=1, max_size=5), max_size=4),
)
def test_term_hits_finds_what_the_pattern_finds(text: str, terms: list[str]) -> None:
    pattern = term_pattern(terms)
    expected = (
        [] if pattern is None else [(m.start(), m.group(0).lower()) for m in pattern.finditer(text)]
    )
    assert term_hits(text, terms) == expected


def test_term_hits_prefix_whole_word_and_unicode_length_change() -> None:
    assert term_hits("Painting, go, gone; ПОРТА", ["paint", "go", "порт"]) == [
        (0, "paint"),
        (10, "go"),
        (20, "порт"),
    ]
    # "İ" lower-cases to two chars: the pattern decides, offsets stay the text's
    assert term_hits("İstanbul port", ["port"]) == [(9, "port")]


# ------------------------------------------------------------------ spread over sessions
def _r(key: str, score: float) -> Ranked:
    return Ranked(key=key, score=score, similarity=None, terms=())


def test_spread_with_decay_one_keeps_the_order_and_cuts_to_k() -> None:
    ranked = [_r("a1", 0.9), _r("a2", 0.8), _r("b1", 0.5)]
    assert [r.key for r in spread(ranked, {"a1": "A", "a2": "A", "b1": "B"}, 1.0, 2)] == [
        "a1",
        "a2",
    ]


def test_spread_lets_another_session_in_before_a_sessions_next_close_hit() -> None:
    group = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "c1": "C"}
    ranked = [_r("a1", 0.9), _r("a2", 0.85), _r("a3", 0.84), _r("b1", 0.7), _r("c1", 0.2)]
    got = [r.key for r in spread(ranked, group, 0.7, 3)]
    # a2 (0.85 x 0.7 = 0.595) falls behind b1 (0.7); c1 is too weak to pass a2
    assert got == ["a1", "b1", "a2"]


def test_spread_keeps_a_hit_far_ahead_of_the_rest() -> None:
    group = {"a1": "A", "a2": "A", "b1": "B"}
    ranked = [_r("a1", 0.9), _r("a2", 0.88), _r("b1", 0.3)]
    assert [r.key for r in spread(ranked, group, 0.7, 2)] == ["a1", "a2"]


def test_spread_of_nothing_is_nothing() -> None:
    assert spread([], {}, 0.5, 3) == []
    assert spread([_r("a", 1.0)], {}, 0.5, 0) == []


# ------------------------------------------------------------------ the user's own lines
@pytest.mark.parametrize(
    ("query", "mine"),
    [
        ("Where do I initially keep my old sneakers?", True),
        ("how many plants did i buy", True),
        ("I\u2019m back: what was my gym locker code", True),
        ("Can you remind me what color the Plesiosaur was?", False),
        ("What does Melanie do to destress?", False),
        ("deploy port of the staging server", False),
    ],
)
def test_first_person_queries(query: str, mine: bool) -> None:
    assert first_person(query) is mine


def test_user_lines_follow_the_message_labels() -> None:
    text = "User: my car is a Civic\nit is blue\n\nAssistant: Nice!\n1. wash it\n\nUser: thanks"
    assert user_lines(text, line_spans(text)) == [True, True, False, False, True]


def test_other_speakers_lines_weigh_less_for_a_first_person_query() -> None:
    """The assistant's elaboration on plants outranks the user's statement until the
    other speaker's lines are scaled down."""
    mine = Candidate("mine", "User: I bought a peace lily at the nursery\n\nAssistant: ok")
    theirs = Candidate(
        "theirs", "User: hello\n\nAssistant: peace lily care: water the peace lily weekly"
    )
    weights = {"peace": 1.0, "lily": 1.0, "nursery": 0.1}
    plain = rank_chunks([mine, theirs], weights, k=2, min_similarity=0.5)
    assert plain[0].key == "theirs"
    own = rank_chunks([mine, theirs], weights, k=2, min_similarity=0.5, other_speaker_weight=0.5)
    assert own[0].key == "mine"


def test_message_ranges_follow_the_labels() -> None:
    from app.domain.raw_history.speakers import message_ranges, second_person

    text = "continued\nUser: q\nAssistant: a\n1. x\n2. y\nUser: thanks"
    assert message_ranges(text, line_spans(text)) == [
        (0, 0),
        (1, 1),
        (2, 4),
        (2, 4),
        (2, 4),
        (5, 5),
    ]
    assert second_person("what did you recommend?") and not second_person("what did I say")


def test_a_named_speakers_lines_weigh_more_when_the_query_names_them() -> None:
    """'What yoga does Maria do?': John's line on yoga outranks Maria's own until the
    other named speakers' lines are scaled down; a name no line is said by changes
    nothing."""
    from app.domain.raw_history import ranking
    from app.domain.raw_history.speakers import query_names, speaker_names

    text_a = "User: Maria: I started aerial yoga\n\nAssistant: John: nice"
    text_b = "User: Maria: hi\n\nAssistant: John: yoga yoga class, beginner yoga for me"
    cands = [Candidate("maria", text_a), Candidate("john", text_b)]
    weights = {"yoga": 1.0}
    assert speaker_names(text_a, line_spans(text_a)) == ["Maria", "John"]
    assert query_names("What yoga does Maria do?") == {"What", "Maria"}
    assert rank_chunks(cands, weights, k=2, min_similarity=0.5)[0].key == "john"
    old = ranking.NAMED_OTHER_WEIGHT
    ranking.NAMED_OTHER_WEIGHT = 0.4
    try:
        named = rank_chunks(cands, weights, k=2, min_similarity=0.5, named={"What", "Maria"})
        assert named[0].key == "maria"
        nobody = rank_chunks(cands, weights, k=2, min_similarity=0.5, named={"Ann"})
        assert nobody[0].key == "john"
    finally:
        ranking.NAMED_OTHER_WEIGHT = old
