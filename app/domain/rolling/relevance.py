"""Which rolling-summary entries ride with this request (seed 001: keep the
`key_decisions`, `past_discussions` and `current_discussion` entries relevant to the
request, general rules always; no relevant entry → no summary block).

Pure and cheap: relevance is shared content words between an entry and the request (the
incoming message and the last user message of the window), with a light stem so
`deploy` meets `deployment`, and character pairs for Chinese / Japanese text, which has
no spaces. No model and no embedder is called: a rolling turn makes no call on the
request path (docs/context-modes.md says why).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from app.domain.kernel.terms import query_terms
from app.domain.rolling.summary import normalize_summary

#: past discussions kept per request at most (the most overlapping, in stored order)
MAX_RELEVANT_PAST = 6

# A rule about the language, the format or the way of working applies to every request
# (seed 001: "general rules … always count as relevant").
GENERAL_WORDS = frozenset(
    """
    language english chinese japanese french german spanish traditional simplified
    reply replies respond response answer answers tone style format formatting markdown
    bullet bullets heading headings emoji emojis concise brief short verbose length
    tab tabs indent indentation spaces naming
    always every workflow commit commits test tests explain explanation cite sources
    語言 中文 英文 日文 繁體 格式 回答 回覆 語氣 風格 簡潔 一律 總是 每次 流程
    """.split()
)

# Replies that carry no topic ("ok?", "thanks!", "好的"): a request made only of these
# (and stopwords) has no content word to judge relevance by (docs/context-modes.md).
ACKNOWLEDGEMENTS = frozenset(
    """
    ok okay okey kk yeah yep yup yea nope nah sure thanks thank thx ty cheers
    hi hello hey cool great nice fine good alright right perfect awesome agreed
    understood continue proceed ahead done hmm hm uh um ah oh wow lol
    ок окей ага угу хорошо ладно понятно отлично спасибо продолжай дальше привет
    好 好的 好啊 嗯 嗯嗯 對 对 是的 謝謝 谢谢 可以 收到 了解 明白 繼續 继续 嗎 吗 呢 吧 啊
    """.split()
)

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str, drop: frozenset[str] = frozenset()) -> set[str]:
    """Content words of `text`, stemmed, plus the character pairs of its CJK runs;
    words and pairs in `drop` left out (before stemming)."""
    out = {_stem(t) for t in query_terms(text) if not _CJK.fullmatch(t) and t not in drop}
    for run in _CJK.findall(text or ""):
        if run not in drop:
            pairs = (run[i : i + 2] for i in range(max(1, len(run) - 1)))
            out.update(p for p in pairs if p not in drop)
    return out


def request_terms(texts: Iterable[str]) -> set[str]:
    """The content words of a request: :func:`terms` of each text without the
    acknowledgements ("ok", "thanks", "好的"), which name no topic."""
    out: set[str] = set()
    for text in texts:
        out |= terms(text, ACKNOWLEDGEMENTS)
    return out


def _overlap(entry: str, query: set[str]) -> int:
    words = terms(entry)
    hits = 0
    for w in words:
        if w in query or (
            len(w) >= 4 and any(q.startswith(w) or w.startswith(q) for q in query if len(q) >= 4)
        ):
            hits += 1
    return hits


def is_general_rule(decision: str) -> bool:
    words = {t.casefold() for t in query_terms(decision)}
    cjk = "".join(_CJK.findall(decision))
    return bool(words & GENERAL_WORDS) or any(w in cjk for w in GENERAL_WORDS if _CJK.match(w))


def relevant_summary(
    summary: dict[str, Any] | None,
    request_texts: Iterable[str],
    *,
    max_past: int = MAX_RELEVANT_PAST,
) -> dict[str, Any] | None:
    """The summary with only the entries relevant to the request, or None when none is.

    `key_decisions`: the general rules and those sharing a word with the request;
    `past_discussions`: those sharing a word, the `max_past` most overlapping kept in
    their stored order; `current_discussion`: kept when it shares a word. A request
    with no content word at all (no incoming message, only "ok?" or "thanks!": stopwords
    and :data:`ACKNOWLEDGEMENTS` do not count) cannot be judged:
    the whole summary is kept, as the seed does when it has no decision model.
    """
    if not summary:
        return None
    doc = normalize_summary(summary)
    query = request_terms(request_texts)
    if not query:
        return doc if _has_content(doc) else None
    decisions = [d for d in doc["key_decisions"] if is_general_rule(d) or _overlap(d, query) > 0]
    scored = [(n, _overlap(p, query)) for n, p in enumerate(doc["past_discussions"])]
    best = sorted((s for s in scored if s[1] > 0), key=lambda s: (-s[1], -s[0]))[:max_past]
    keep = {n for n, _ in best}
    past = [p for n, p in enumerate(doc["past_discussions"]) if n in keep]
    current = doc["current_discussion"] if _overlap(doc["current_discussion"], query) else ""
    out = {"key_decisions": decisions, "past_discussions": past, "current_discussion": current}
    return out if _has_content(out) else None


def _has_content(doc: dict[str, Any]) -> bool:
    return bool(doc["key_decisions"] or doc["past_discussions"] or doc["current_discussion"])


def request_texts(incoming: str | None, recent: Sequence[Any]) -> list[str]:
    """What a request is about: the incoming message and the window's last user message
    (a follow-up such as "and the second one?" names its topic there)."""
    texts = [incoming] if incoming else []
    for m in reversed(recent):
        if getattr(m, "role", None) == "user" and getattr(m, "content", ""):
            texts.append(m.content)
            break
    return texts
