from __future__ import annotations

from app.domain.kernel.hits import MemoryHit
from app.domain.raw_history.window import best_window, term_occurrences
from app.domain.search.render import format_hits, head_excerpt


def filler_lines(n_chars: int, seed: str = "talk") -> str:
    lines: list[str] = []
    i = 0
    while sum(len(line) + 1 for line in lines) < n_chars:
        lines.append(f"Assistant: {seed} number {i:03d} about unrelated weather and lunch plans.")
        i += 1
    return "\n".join(lines)[:n_chars]


def chunk_with_evidence_at(pos: int, total: int, evidence: str) -> str:
    before = filler_lines(pos - 1)
    text = before + "\n" + evidence + "\n"
    return text + filler_lines(total - len(text), "chat")


EVIDENCE = "User: the vault rotation for db_password runs every 90 days via cron."


def test_best_window_finds_evidence_head_misses() -> None:
    text = chunk_with_evidence_at(3000, 4000, EVIDENCE)
    assert len(text) == 4000 and text.index(EVIDENCE) == 3000
    head = head_excerpt(text, 1200)
    window = best_window(text, ["vault", "rotation"], 1200)
    assert "vault rotation" not in head
    assert EVIDENCE in window
    assert window.startswith("… ")
    assert len(window) <= 1200 + 4


def test_format_hits_uses_window_and_can_fall_back_to_head() -> None:
    text = chunk_with_evidence_at(3000, 4000, EVIDENCE)
    hit = MemoryHit("raw", text, session_id="s1", start_seq=3, end_seq=9)
    assert EVIDENCE in format_hits("vault rotation", "raw", [hit])
    legacy = format_hits("vault rotation", "raw", [hit], best_window_enabled=False)
    assert "vault" not in legacy.split("\n", 1)[1]


def test_distinct_terms_beat_repeats() -> None:
    repeats = "port " * 30
    both = "the nginx port is 8099"
    text = repeats + "x" * 3000 + " " + both + " " + "y" * 3000
    window = best_window(text, ["port", "nginx"], 200)
    assert "nginx port" in window
    assert "port port" not in window


def test_no_terms_returns_head_cut_at_word() -> None:
    text = "alpha beta gamma " * 200
    window = best_window(text, ["missing"], 100)
    assert window.endswith(" …")
    assert not window.startswith("…")
    assert text.startswith(window[:-2])
    assert window[:-2].endswith(("alpha", "beta", "gamma"))


def test_short_text_returned_whole() -> None:
    assert best_window("  short text  ", ["x"], 1200) == "short text"
    assert best_window("anything", ["x"], 0) == ""


def test_window_snaps_to_lines() -> None:
    lines = [f"line {i:03d} filler filler filler" for i in range(200)]
    lines[120] = "line 120 the answer is server_port 8099"
    text = "\n".join(lines)
    window = best_window(text, ["server", "port"], 400)
    body = window.removeprefix("… ").removesuffix(" …")
    assert "server_port 8099" in body
    assert body.startswith("line ")  # starts on a line boundary
    assert body.endswith("filler")  # ends on a line boundary
    assert len(body) <= 400


def test_window_at_end_has_no_suffix() -> None:
    text = "x " * 1000 + "final answer nginx"
    window = best_window(text, ["nginx"], 100)
    assert window.endswith("final answer nginx")
    assert window.startswith("… ")


def test_term_occurrences_word_start() -> None:
    text = "Report the port; ports and server_port. Порта нет"
    got = [(text[s:e], t) for s, e, t in term_occurrences(text, ["port", "порт"])]
    assert got == [("port", "port"), ("port", "port"), ("port", "port"), ("Порт", "порт")]
    assert term_occurrences(text, []) == []
