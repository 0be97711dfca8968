"""The text side's candidate cut (`search_service.text_candidates`)."""

from app.domain.raw_history.search import TEXT_CANDIDATES, TEXT_CANDIDATES_ALL, text_candidates


def _ids(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


def test_best_summed_idf_first_and_every_holder_reported() -> None:
    rare, common = _ids(3, "r"), _ids(TEXT_CANDIDATES_ALL + 10, "c")
    top, holders = text_candidates(
        ["rare", "common"], [rare, common + rare], {"rare": 5.0, "common": 0.5}, TEXT_CANDIDATES
    )
    assert top[:3] == rare  # both terms: 5.5, before the 0.5 of the rest
    assert len(top) == TEXT_CANDIDATES
    assert holders == set(rare) | set(common)


def test_a_small_history_takes_every_chunk_holding_a_term() -> None:
    """With few chunks, many hold every common term of the query: the presence-only sum
    cuts among ties, so all are taken (bench-breadcrumbs lost a literal to that cut)."""
    tied = _ids(TEXT_CANDIDATES + 5, "t")  # all terms: tied at the top
    short = ["s00001"]  # lacks one common term: would rank just past the cut
    matches = [tied, tied + short, tied + short]
    weights = {"change": 0.4, "billing": 0.2, "api": 0.2}
    top, _ = text_candidates(["change", "billing", "api"], matches, weights, TEXT_CANDIDATES)
    assert len(tied) + 1 <= TEXT_CANDIDATES_ALL
    assert set(top) == set(tied) | set(short) and top[-1] == "s00001"
    # past TEXT_CANDIDATES_ALL holders the cut applies again
    many = _ids(TEXT_CANDIDATES_ALL + 1, "m")
    top, _ = text_candidates(["api"], [many], {"api": 0.2}, TEXT_CANDIDATES)
    assert len(top) == TEXT_CANDIDATES
