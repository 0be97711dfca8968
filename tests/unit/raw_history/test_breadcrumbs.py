from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.raw_history.breadcrumbs import (
    MAX_BREADCRUMBS,
    clean_breadcrumb,
    extract_breadcrumbs,
    merge_breadcrumbs,
)

# (id, text, exact expected breadcrumbs in order)
EXACT = [
    ("posix-abs-trailing-dot", "Edit /etc/nginx/nginx.conf.", ["/etc/nginx/nginx.conf"]),
    ("dot-relative", "open ./src/app.py, then ../lib/util.js;", ["./src/app.py", "../lib/util.js"]),
    ("home", "see ~/x and ~/.bashrc!", ["~/x", "~/.bashrc"]),
    (
        "after-equals",
        "--config=/etc/app/x.conf --out=dist/app.js",
        ["/etc/app/x.conf", "dist/app.js"],
    ),
    ("relative-with-ext", "it lives in src/app/main.py?", ["src/app/main.py"]),
    ("windows", r"Файл C:\Users\me\file.txt лежит тут.", [r"C:\Users\me\file.txt"]),
    (
        "windows-spaces",
        r"run C:\Program Files\Navi\navi.exe — ok",
        [r"C:\Program Files\Navi\navi.exe"],
    ),
    ("windows-unc", r"share \\nas\backups\db.dump, ok", [r"\\nas\backups\db.dump"]),
    ("windows-dir-trailing", r"cd D:\work\proj\ then", ["D:\\work\\proj\\"]),
    ("url-query", "see https://x.io/a?b=1&c=two#frag.", ["https://x.io/a?b=1&c=two#frag"]),
    ("url-in-parens", "(see https://x.io/docs/page)", ["https://x.io/docs/page"]),
    (
        "url-balanced-parens",
        "https://en.wikipedia.org/wiki/Foo_(bar)).",
        ["https://en.wikipedia.org/wiki/Foo_(bar)"],
    ),
    ("md-link", "Read [the docs](https://example.com/a?x=1).", ["https://example.com/a?x=1"]),
    ("md-bold-url", "**https://example.com/b**", ["https://example.com/b"]),
    ("url-cjk-after", "文档https://example.com/zh。谢谢", ["https://example.com/zh"]),
    ("url-angle", "<https://example.com/c>", ["https://example.com/c"]),
    ("www", "go to www.example.org/start, then", ["www.example.org/start"]),
    ("inline-code", "Run `nginx -s reload` now.", ["nginx -s reload"]),
    ("inline-code-double", "Use ``a `b` c`` here", ["a `b` c"]),
    ("snake", "set server_port; MAX_RETRIES=3", ["server_port", "MAX_RETRIES"]),
    ("snake-cjk", "请查看server_port配置", ["server_port"]),
    ("snake-cyrillic", "Параметр memory_recall_k равен двум.", ["memory_recall_k"]),
    (
        "camel",
        "ContextBuilder calls getUserName and HTTPServer.",
        ["ContextBuilder", "getUserName", "HTTPServer"],
    ),
    ("bold-camel", "**ContextBuilder**.", ["ContextBuilder"]),
    ("strikethrough", "~~old_value~~ replaced", ["old_value"]),
    ("constant", "NGINX and HTTP2 but not OK or THE", ["NGINX", "HTTP2"]),
    ("ticket-key", "Fixed in JIRA-123 and ABC-9.", ["JIRA-123", "ABC-9"]),
    ("issue-number", "See #1234, not #1 or &#1234;", ["#1234"]),
    ("amount-comma-decimal", "Память: 4,5 GB.", ["4,5 GB"]),
    ("amount-various", "12 ms, 80%, $120, 3.5 GiB!", ["12 ms", "80%", "$120", "3.5 GiB"]),
    ("amount-thousands", "costs $1,200.50 or 1 500 руб", ["$1,200.50", "500 руб"]),
    ("amount-nbsp", "load 7\u00a0GB", ["7 GB"]),
    ("amount-russian", "занимает 4,5 ГБ и 300 мс", ["4,5 ГБ", "300 мс"]),
    ("amount-chinese", "TTL设为300秒。价格120元", ["TTL", "300秒", "120元"]),
    ("amount-compact", "timeout 30s, retry 5m, 10k rows", ["30s", "5m", "10k"]),
    ("port-word", "use port 8099.", ["8099"]),
    ("port-colon", "listen :8080 please", ["8080"]),
    ("port-russian", "порт 5432 занят", ["5432"]),
    ("host-port", "curl localhost:8099/health", ["localhost:8099", "8099"]),
    ("ip", "ssh 10.0.0.7 or 999.1.1.1", ["10.0.0.7"]),
    ("not-a-time", "meet at 12:30", []),
    (
        "cjk-glued",
        "见#1234号，版本v2.25.0版，访问localhost:8099即可，NAVI-7号",
        ["#1234", "v2.25.0", "localhost:8099", "8099", "NAVI-7"],
    ),
    ("version-not-ip", "1.2.3.4 and 1.2.3a", ["1.2.3.4"]),
    ("version", "upgrade to v2.25.0 from 1.2.3", ["v2.25.0", "1.2.3"]),
    ("email", "mail a.b@example.org.", ["a.b@example.org"]),
    (
        "file-name",
        "edit settings.py and __init__.py, Dockerfile",
        ["settings.py", "__init__.py", "Dockerfile"],
    ),
    ("quoted", 'He said "use the blue button" twice', ["use the blue button"]),
    ("quoted-guillemets", "Ответ: «Привет, мир!»", ["Привет, мир"]),
    ("quoted-single", "don't say 'keep it short' it's rude", ["keep it short"]),
    ("quoted-curly", "“ship it on Friday”", ["ship it on Friday"]),
    ("quoted-one-word", 'a "word" only', []),
    ("quoted-too-long", '"one two three four five six seven eight nine"', []),
    ("quoted-keeps-inner", '"bump server_port now"', ["bump server_port now", "server_port"]),
    ("plain-prose", "Just a normal sentence, nothing here.", []),
    ("slashes-not-paths", "and/or TCP/IP km/h 1/2 и/или", ["TCP"]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_extract_exact(text: str, expected: list[str]) -> None:
    assert extract_breadcrumbs([text]) == expected


# (id, text, must contain, must not contain)
CONTAINS = [
    (
        "code-fence",
        "```python\nimport os\nCONFIG_PATH = '/etc/app/config.yaml'\n```",
        ["CONFIG_PATH", "/etc/app/config.yaml"],
        ["python", "```"],
    ),
    (
        "long-inline-code-scanned",
        "`" + "cp /srv/data/input.csv " * 12 + "`",
        ["/srv/data/input.csv"],
        [],
    ),
    (
        "url-not-split",
        "https://x.io/api/v1/user_profile?id=5",
        ["https://x.io/api/v1/user_profile?id=5"],
        ["user_profile", "/api/v1/user_profile"],
    ),
    (
        "path-not-split",
        "/srv/app/main_module.py",
        ["/srv/app/main_module.py"],
        ["main_module", "main_module.py"],
    ),
    (
        "chinese-around",
        "请把/etc/hosts文件里的端口8080改成9000",
        ["/etc/hosts", "8080"],
        ["/etc/hosts文件里的端口8080改成9000"],
    ),
    (
        "russian-around",
        "Сервер слушает порт 8099, конфиг в /opt/navi/.env — см. NAVI-42",
        ["8099", "/opt/navi/.env", "NAVI-42"],
        [],
    ),
]


@pytest.mark.parametrize(
    ("text", "present", "absent"), [c[1:] for c in CONTAINS], ids=[c[0] for c in CONTAINS]
)
def test_extract_contains(text: str, present: list[str], absent: list[str]) -> None:
    got = extract_breadcrumbs([text])
    for item in present:
        assert item in got
    for item in absent:
        assert item not in got


def test_dedupe_case_insensitive_keeps_first_spelling_and_order() -> None:
    got = extract_breadcrumbs(["Server_Port first", "then server_port and /a/b", "SERVER_PORT"])
    assert got == ["Server_Port", "/a/b"]


def test_order_is_first_occurrence_across_texts() -> None:
    assert extract_breadcrumbs(["NGINX here", "then /etc/hosts"]) == ["NGINX", "/etc/hosts"]


def test_over_limit_keeps_most_specific_first() -> None:
    text = "NGINX REDIS KAFKA 12 ms server_port /etc/hosts https://x.io/a JIRA-7"
    assert extract_breadcrumbs([text], limit=3) == ["/etc/hosts", "https://x.io/a", "JIRA-7"]
    assert extract_breadcrumbs([text], limit=5) == [
        "/etc/hosts",
        "https://x.io/a",
        "JIRA-7",
        "server_port",
        "12 ms",
    ]


def test_limit_default_and_zero() -> None:
    text = " ".join(f"name_{i}" for i in range(100))
    assert len(extract_breadcrumbs([text])) == MAX_BREADCRUMBS
    assert extract_breadcrumbs([text], limit=0) == []


def test_bare_string_is_one_text() -> None:
    assert extract_breadcrumbs("see /etc/hosts") == ["/etc/hosts"]


def test_empty_inputs() -> None:
    assert extract_breadcrumbs([]) == []
    assert extract_breadcrumbs(["", "   "]) == []


PATHOLOGICAL = [
    "+a/" * 4000,
    "a%" * 6000,
    "a.b+c" * 2500,
    "«a " * 4000,
    "‘a " * 4000,
    "「a " * 4000,
    '"a b' + "c " * 6000,
    "C:\\" + "a b" * 4000,
    "1.1 " * 3000,
]


@pytest.mark.parametrize("text", PATHOLOGICAL, ids=range(len(PATHOLOGICAL)))
def test_no_quadratic_blowup(text: str) -> None:
    # linear scans take ~20 ms here; the quadratic versions of these patterns took 1-3 s
    started = time.perf_counter()
    extract_breadcrumbs([text])
    assert time.perf_counter() - started < 0.5


def test_deterministic() -> None:
    texts = ["Edit /etc/a.conf, port 8099, `make test`, «два слова»", "ABC-1 ContextBuilder 5 GB"]
    assert extract_breadcrumbs(texts) == extract_breadcrumbs(list(texts))


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("/etc/hosts.", "/etc/hosts"),
        ("**bold**", "bold"),
        ("x)", "x"),
        ("f(x)", "f(x)"),
        ("a?!.", "a"),
        ("  two   words ", "two words"),
        ("~/x", "~/x"),
        ("~~gone~~", "gone"),
    ],
)
def test_clean_breadcrumb(raw: str, cleaned: str) -> None:
    assert clean_breadcrumb(raw) == cleaned


def test_merge_keys_first_dedupe_and_cap() -> None:
    keys = ["server_port", "8098", "Nginx config"]
    extracted = ["SERVER_PORT", "/etc/nginx/nginx.conf", "8098", "12 ms"]
    assert merge_breadcrumbs(keys, extracted) == [
        "server_port",
        "8098",
        "Nginx config",
        "/etc/nginx/nginx.conf",
        "12 ms",
    ]
    assert merge_breadcrumbs(keys, extracted, limit=2) == ["server_port", "8098"]


def test_merge_skips_empty_none_and_cleans() -> None:
    assert merge_breadcrumbs(["NONE", "", "  ", "port."], ["none", "x"]) == ["port", "x"]


@given(st.lists(st.text(max_size=300), max_size=5), st.integers(min_value=0, max_value=50))
def test_extract_properties(texts: list[str], limit: int) -> None:
    got = extract_breadcrumbs(texts, limit=limit)
    assert len(got) <= limit
    folded = [g.casefold() for g in got]
    assert len(folded) == len(set(folded))
    assert all(g and g == g.strip() for g in got)
    assert got == extract_breadcrumbs(texts, limit=limit)
