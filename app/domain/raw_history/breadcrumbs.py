"""Deterministic breadcrumb extraction: the entities a later question is phrased with.

A file, a command, a port, an amount, a ticket, a link — a person asking "what was
that file" or "the port we picked" names one of these, so raw chunks are indexed by
them next to their text. The extractor runs on the messages compression drops, so it
also covers the hard-truncate path that never produces a summarizer `KEYS:` line.

How a text is scanned:

* fenced-code fence lines are removed (their content is scanned like any text);
* extractors run from the most specific kind to the least; each one blanks out what
  it took, so `https://x.io/a_b` never also yields `a_b`, nor `/etc/app.conf` `app.conf`;
* quoted phrases are read from the text as it was after code and links were taken,
  so a quoted phrase and an identifier inside it are both kept;
* every candidate is cleaned (markdown `*`/`~`, trailing `.,;:!?`, an unbalanced `)`)
  and deduplicated case-insensitively, keeping the first spelling and position.

The result is in order of first occurrence; when there are more than `limit`, the most
specific kinds win (see the `_R_*` ranks) and the result is in rank order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.domain.kernel.stopwords import STOPWORDS

MAX_BREADCRUMBS = 40
_MAX_CRUMB_CHARS = 200

# Specificity ranks, lower first when the limit cuts.
_R_LOCATOR = 0  # URL, path, e-mail, host:port, IP address
_R_REFERENCE = 1  # ticket key, #issue, inline code, file name
_R_IDENTIFIER = 2  # snake_case, CamelCase, port number
_R_VALUE = 3  # amounts, versions, UTF-8-like keys
_R_WEAK = 4  # all-caps words, quoted phrases

_TRAILING = ".,;:!?。，；：！？、"
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
_NOT_ASCII_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_ASCII_WORD_AFTER = r"(?![A-Za-z0-9_])"

_FENCE = re.compile(r"(?m)^[ \t]*(?:```|~~~)[^`\n]*$")
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_URL = re.compile(
    r"(?:(?<![A-Za-z0-9])(?:https?|ftp|wss?|ssh|file)://|(?<![A-Za-z0-9_.@/])www\.)"
    rf"[^\s<>\"'`«»\[\]{{}}|\\^{_CJK}]+"
)
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9_.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
)
_WIN_SEG = rf"[^\\/\s:*?\"<>|`'«»()\[\]{{}},;{_CJK}]"
_WIN_PATH = re.compile(
    # directories may hold single spaces (`C:\Program Files\`), the last segment may not
    rf"(?<![A-Za-z0-9])[A-Za-z]:\\(?:{_WIN_SEG}+(?: {_WIN_SEG}+)*\\)*{_WIN_SEG}*"
    rf"|(?<![A-Za-z0-9_\\])\\\\[A-Za-z0-9_.$-]+(?:\\{_WIN_SEG}+)+"
)
# Path segments: ASCII, Latin-1/Latin Extended and Cyrillic letters; not CJK, so a path
# written straight into Chinese text ends where the Chinese begins.
_SEG = r"[A-Za-z0-9_.\-~+@%\u00c0-\u024f\u0400-\u04ff]"
# A path starts where a run of path characters starts, never inside one (which would
# also make a long run cost quadratic time).
_PATH_BEFORE = r"(?<![A-Za-z0-9_.\-~+@%\u00c0-\u024f\u0400-\u04ff/\\:])"
_EXT = r"\.[A-Za-z][A-Za-z0-9]{0,7}" + _NOT_ASCII_WORD_AFTER
_POSIX_PATH = re.compile(
    _PATH_BEFORE
    + rf"(?:(?:~|\.\.?)(?:/{_SEG}+)+/?"  # ~/x  ./src/app.py  ../a
    + rf"|/{_SEG}+(?:/{_SEG}+)+/?"  # /etc/nginx/nginx.conf (two segments at least)
    + rf"|/{_SEG}*{_EXT}"  # /hosts.txt
    + rf"|{_SEG}+(?:/{_SEG}+)*/{_SEG}*?{_EXT})"  # src/app/main.py
)
_FILE_EXTS = (
    "py pyi ipynb js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf env md rst txt "
    "log csv tsv sql sh bash zsh ps1 bat go rs java kt swift c h cpp hpp cc cs rb php html "
    "htm css scss xml pdf doc docx xls xlsx ppt pptx png jpg jpeg gif svg webp mp3 mp4 wav "
    "zip tar gz tgz bz2 xz 7z rar whl lock db sqlite parquet pem key crt service tf hcl proto "
    "graphql vue lua dart"
).split()
_FILE_NAME = re.compile(
    r"(?<![A-Za-z0-9_/\\.~@-])"
    r"(?:[A-Za-z0-9_][A-Za-z0-9_.\-]*\.(?i:"
    + "|".join(sorted(_FILE_EXTS, key=len, reverse=True))
    + ")"
    r"|\.(?:env|bashrc|zshrc|profile|gitignore|dockerignore|npmrc|pypirc|netrc)"
    r"|(?:Dockerfile|Makefile|Procfile|Justfile|Jenkinsfile|Vagrantfile|Containerfile))"
    + _NOT_ASCII_WORD_AFTER
)
_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_HOST_PORT = re.compile(
    r"(?<![A-Za-z0-9_.:/-])"
    rf"(?:(?P<host>localhost|{_IPV4}|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|[a-z][a-z0-9_-]*)"
    r":(?P<port>\d{2,5})(?![\d:.]\d|[A-Za-z0-9_])"
    rf"|(?P<ip>{_IPV4})(?![\d.]\d|[A-Za-z0-9_]))"
)
_TICKET = re.compile(
    _NOT_ASCII_WORD_BEFORE + r"(?<!-)[A-Z][A-Z0-9]{1,9}-\d{1,6}" + _NOT_ASCII_WORD_AFTER
)
_NOT_TICKET = frozenset({"UTF", "SHA", "MD", "ISO", "CP", "GPT", "COVID", "TLS", "SSL", "HTTP"})
_ISSUE = re.compile(r"(?<![A-Za-z0-9_&#])#\d{2,7}(?![A-Za-z0-9_])")
_PORT_WORD = re.compile(
    r"(?i:(?<![A-Za-z0-9_\u0400-\u04ff])(?:ports?|порт[ау]?|端口)\s*(?:[:=]|is|номер|№)?\s*)"
    r"(?P<port>\d{2,5})(?![0-9A-Za-z_])"
    r"|(?<![^\s(]):(?P<bare>\d{2,5})(?![A-Za-z0-9_.:])"
)
_NUM = r"(?:\d{1,3}(?:[,.]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?)"
_NUM_BEFORE = r"(?<![A-Za-z0-9_.,])"
_UNITS = (
    "KB MB GB TB PB KiB MiB GiB TiB PiB kB Kb Mb Gb bytes byte bits bit Kbps Mbps Gbps ms µs "
    "μs us ns sec secs second seconds min mins minute minutes hr hrs hour hours day days "
    "week weeks month months year years Hz kHz MHz GHz rpm rps qps tps fps req/s ops/s "
    "tokens token chars characters lines rows px pt em rem dpi °C °F km kg mg ml cores core "
    "vCPU vCPUs CPU CPUs GPU GPUs USD EUR RUB GBP CNY руб рублей рубля ₽ € $ евро долларов "
    "ГБ МБ КБ ТБ мс сек секунд секунды мин минут минуты час часа часов дней дня тыс "
    "млн млрд шт 秒 分钟 小时 天 元 个"
).split()
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(set(_UNITS), key=len, reverse=True))
_AMOUNT = re.compile(
    rf"[$€£¥₽]\s?{_NUM}(?:\s?(?:k|K|M|bn|mln))?{_NOT_ASCII_WORD_AFTER}"
    rf"|{_NUM_BEFORE}{_NUM}\s?%"
    rf"|{_NUM_BEFORE}{_NUM}\s?(?i:{_UNIT_ALT})(?![A-Za-z0-9_\u0400-\u04ff])"
    rf"|{_NUM_BEFORE}{_NUM}(?:ms|s|m|h|d|w|x|k|K){_NOT_ASCII_WORD_AFTER}"
)
_VERSION = re.compile(
    r"(?<![A-Za-z0-9_.])(?:v\d+(?:\.\d+)+|\d+\.\d+\.\d+)(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
    r"(?![A-Za-z0-9_]|\.[A-Za-z0-9_])"
)
_SNAKE = re.compile(
    _NOT_ASCII_WORD_BEFORE + r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+" + _NOT_ASCII_WORD_AFTER
)
#: A word with a capital in it: `_word` takes no other (a lowercase word has no hump and
#: is not all caps), so the others are not matched at all: a Python callback per word of
#: prose was a fifth of a chat import's CPU in its reading and chunking (issue 47).
_WORD = re.compile(
    _NOT_ASCII_WORD_BEFORE + r"(?=[A-Za-z0-9]*[A-Z])[A-Za-z][A-Za-z0-9]+" + _NOT_ASCII_WORD_AFTER
)
_CAMEL_HUMP = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_QUOTED = re.compile(
    # bounded bodies: an unclosed quote costs a bounded look-ahead, not the rest of the line
    r"(?<![A-Za-z0-9_])\"(?P<a>\S[^\"\n]{0,200}?\S)\"(?![A-Za-z0-9_])"
    r"|[“„](?P<b>[^”“„\n]{1,200}?)[”“]"
    r"|«(?P<c>[^«»\n]{1,200}?)»"
    r"|‘(?P<d>[^‘’\n]{1,200}?)’"
    r"|「(?P<e>[^「」\n]{1,200}?)」"
    r"|(?<!\w)'(?P<f>\S[^'\n]{0,200}?\S)'(?!\w)"
)


@dataclass(frozen=True)
class _Found:
    text: str
    rank: int
    order: tuple[int, int, int]


# (text, rank, offset in the match) or None to leave the match for later extractors.
_Take = list[tuple[str, int, int]] | None
_Handler = Callable[[re.Match[str]], _Take]


def clean_breadcrumb(value: str) -> str:
    """Strip markdown decoration, trailing punctuation and an unbalanced closing bracket."""
    text = " ".join(value.split())
    while True:
        before = text
        text = text.strip("*").strip()
        text = text.removeprefix("~~").removesuffix("~~")  # strikethrough, not a home dir
        text = text.rstrip(_TRAILING)
        if text and text[-1] in _CLOSERS and text.count(text[-1]) > text.count(_CLOSERS[text[-1]]):
            text = text[:-1]
        if text == before:
            return text


def extract_breadcrumbs(texts: Iterable[str], limit: int = MAX_BREADCRUMBS) -> list[str]:
    """Entities from `texts`, deduplicated case-insensitively, most specific kept first."""
    if limit <= 0:
        return []
    if isinstance(texts, str):  # a bare string is an Iterable[str] of characters
        texts = [texts]
    found: dict[str, _Found] = {}
    for index, text in enumerate(texts):
        for seq, (pos, crumb, rank) in enumerate(_scan(text or "")):
            fold = crumb.casefold()
            prior = found.get(fold)
            if prior is None:
                found[fold] = _Found(crumb, rank, (index, pos, seq))
            elif rank < prior.rank:
                found[fold] = _Found(prior.text, rank, prior.order)
    items = sorted(found.values(), key=lambda f: f.order)
    if len(items) > limit:
        items = sorted(items, key=lambda f: (f.rank, f.order))[:limit]
    return [f.text for f in items]


def merge_breadcrumbs(
    keys: Iterable[str], extracted: Iterable[str], limit: int = MAX_BREADCRUMBS
) -> list[str]:
    """The summarizer's KEYS first (its order is "most important first"), then extracted."""
    out: list[str] = []
    seen: set[str] = set()
    for raw in (*keys, *extracted):
        crumb = clean_breadcrumb(raw or "")
        fold = crumb.casefold()
        if not crumb or fold == "none" or fold in seen or len(crumb) > _MAX_CRUMB_CHARS:
            continue
        seen.add(fold)
        out.append(crumb)
        if len(out) >= limit:
            break
    return out


def _scan(text: str) -> list[tuple[int, str, int]]:
    """(position, breadcrumb, rank) for every entity in one text, in extraction order."""
    work = _FENCE.sub("", text).replace("\u00a0", " ").replace("\u202f", " ")
    out: list[tuple[int, str, int]] = []
    work = _harvest(_INLINE_CODE, work, out, _code)
    work = _harvest(_URL, work, out, _fixed(_R_LOCATOR))
    quotable = work
    work = _harvest(_EMAIL, work, out, _fixed(_R_LOCATOR))
    work = _harvest(_WIN_PATH, work, out, _fixed(_R_LOCATOR))
    work = _harvest(_POSIX_PATH, work, out, _fixed(_R_LOCATOR))
    work = _harvest(_FILE_NAME, work, out, _fixed(_R_REFERENCE))
    work = _harvest(_HOST_PORT, work, out, _host_port)
    work = _harvest(_TICKET, work, out, _ticket)
    work = _harvest(_ISSUE, work, out, _fixed(_R_REFERENCE))
    work = _harvest(_PORT_WORD, work, out, _port)
    work = _harvest(_AMOUNT, work, out, _fixed(_R_VALUE))
    work = _harvest(_VERSION, work, out, _fixed(_R_VALUE))
    work = _harvest(_SNAKE, work, out, _fixed(_R_IDENTIFIER))
    _harvest(_WORD, work, out, _word)
    _harvest(_QUOTED, quotable, out, _quoted)
    out.sort(key=lambda item: item[0])  # stable: same position keeps extraction order
    return out


def _harvest(
    pattern: re.Pattern[str], work: str, out: list[tuple[int, str, int]], handler: _Handler
) -> str:
    """Collect what `handler` takes from each match and blank the taken matches out."""

    def replace(match: re.Match[str]) -> str:
        taken = handler(match)
        if taken is None:
            return match.group(0)
        for raw, rank, offset in taken:
            crumb = clean_breadcrumb(raw)
            if crumb and len(crumb) <= _MAX_CRUMB_CHARS:
                out.append((match.start() + offset, crumb, rank))
        return " " * len(match.group(0))

    return pattern.sub(replace, work)


def _fixed(rank: int) -> _Handler:
    def handler(match: re.Match[str]) -> _Take:
        return [(match.group(0), rank, 0)]

    return handler


def _code(match: re.Match[str]) -> _Take:
    inner = match.group(2).strip()
    if len(inner) > _MAX_CRUMB_CHARS:  # a long snippet is text to scan, not one entity
        return None
    whole = (_URL, _WIN_PATH, _POSIX_PATH)
    rank = _R_LOCATOR if any(p.fullmatch(inner) for p in whole) else _R_REFERENCE
    return [(inner, rank, len(match.group(1)))]


def _host_port(match: re.Match[str]) -> _Take:
    if match.group("ip") is not None:
        return [(match.group(0), _R_LOCATOR, 0)] if _valid_ip(match.group("ip")) else None
    host, port = match.group("host"), match.group("port")
    if not _valid_port(port) or (re.fullmatch(_IPV4, host) and not _valid_ip(host)):
        return None
    return [
        (match.group(0), _R_LOCATOR, 0),
        (port, _R_IDENTIFIER, match.start("port") - match.start()),
    ]


def _ticket(match: re.Match[str]) -> _Take:
    prefix = match.group(0).split("-", 1)[0]
    return [(match.group(0), _R_VALUE if prefix in _NOT_TICKET else _R_REFERENCE, 0)]


def _port(match: re.Match[str]) -> _Take:
    group = "port" if match.group("port") is not None else "bare"
    port = match.group(group)
    if not _valid_port(port):
        return None
    return [(port, _R_IDENTIFIER, match.start(group) - match.start())]


def _word(match: re.Match[str]) -> _Take:
    word = match.group(0)
    if any(c.islower() for c in word):
        return [(word, _R_IDENTIFIER, 0)] if _CAMEL_HUMP.search(word) else None
    if len(word) >= 3 and word.lower() not in STOPWORDS:
        return [(word, _R_WEAK, 0)]
    return None


def _quoted(match: re.Match[str]) -> _Take:
    name = next(g for g in "abcdef" if match.group(g) is not None)
    inner = match.group(name).strip()
    if not 2 <= len(inner.split()) <= 8:
        return None
    return [(inner, _R_WEAK, match.start(name) - match.start())]


def _valid_port(port: str) -> bool:
    return 1 <= int(port) <= 65535


def _valid_ip(ip: str) -> bool:
    return all(int(part) <= 255 for part in ip.split("."))
