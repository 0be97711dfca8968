from app.domain.compression import Msg
from app.domain.kernel.layout import CONTEXT_HEAD, order_context


def _m(seq: int, role: str = "user", **kw: object) -> Msg:
    return Msg(role, f"m{seq}", sequence_number=seq, **kw)  # type: ignore[arg-type]


def _seqs(rows: list[Msg]) -> list[int]:
    return [r.sequence_number for r in order_context(rows, lambda r: r.metadata)]


def test_plain_sequence_order_without_a_head_summary() -> None:
    rows = [_m(3), _m(1, "assistant"), _m(2, "system"), _m(0)]
    assert _seqs(rows) == [0, 1, 2, 3]


def test_client_summary_keeps_its_position() -> None:
    rows = [_m(0), _m(1, is_summary=True), _m(2)]
    assert _seqs(rows) == [0, 1, 2]


def test_head_summary_leads_after_older_system_rows() -> None:
    rows = [
        _m(2, "system"),  # an allowlisted record older than the compression
        _m(5),
        _m(6, "assistant"),
        _m(9, is_summary=True, metadata={CONTEXT_HEAD: True}),
        _m(11),  # appended after the compression
        _m(12, "system"),  # a record appended after the compression stays in place
        _m(13, "assistant"),
    ]
    assert _seqs(rows) == [2, 9, 5, 6, 11, 12, 13]


def test_newest_head_summary_sets_the_boundary() -> None:
    rows = [
        _m(1, is_summary=True, metadata={CONTEXT_HEAD: True}),
        _m(3, "system"),
        _m(4, is_summary=True, metadata={CONTEXT_HEAD: True}),
        _m(2),
    ]
    assert _seqs(rows) == [3, 1, 4, 2]
