"""What a chunk's embedding takes: its segments' texts, and their vectors back per chunk."""

from __future__ import annotations

from app.domain.raw_history.indexer import segment_texts, segment_vectors
from app.domain.raw_history.ranking import SEGMENT_CHARS, segment_spans


def test_every_segment_is_embedded_and_no_chunk_text_of_its_own() -> None:
    long = "\n".join(f"User: line {n} " + "x" * 300 for n in range(8))
    contents = ["User: short", long]
    texts, spans = segment_texts(contents)
    assert spans == [segment_spans(c) for c in contents]
    assert len(spans[1]) > 1 and all(b - a <= SEGMENT_CHARS for a, b in spans[1])
    assert texts == [c[a:b] for c, sp in zip(contents, spans, strict=True) for a, b in sp]
    assert long not in texts  # the whole chunk is not embedded


def test_a_blank_chunk_is_one_segment() -> None:
    texts, spans = segment_texts(["   \n  "])
    assert spans == [[(0, 6)]] and texts == ["   \n  "]


def test_vectors_back_per_chunk_none_when_one_is_missing() -> None:
    spans = [[(0, 5)], [(0, 3), (4, 9)], [(0, 2)]]
    v = [[float(n)] for n in range(4)]
    assert segment_vectors(spans, v) == [
        [(0, 5, [0.0])],
        [(0, 3, [1.0]), (4, 9, [2.0])],
        [(0, 2, [3.0])],
    ]
    assert segment_vectors(spans, [v[0], None, v[2], v[3]]) == [
        [(0, 5, [0.0])],
        [],
        [(0, 2, [3.0])],
    ]
