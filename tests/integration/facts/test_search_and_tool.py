"""search_facts (vector cutoff, text fallback with and without pg_trgm) and the memory tool."""

from __future__ import annotations

import psycopg
from litestar.testing import AsyncTestClient

from tests.fakes.ollama_server import FakeOllama, cosine, fake_embedding
from tests.integration.facts.conftest import sql


async def _save(client: AsyncTestClient, **body) -> dict:  # type: ignore[no-untyped-def]
    r = await client.post("/memory/facts", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _distance(a: str, b: str) -> float:
    return 1.0 - cosine(fake_embedding(a), fake_embedding(b))


async def test_vector_cutoff_is_respected(client: AsyncTestClient) -> None:
    await _save(client, category="preferences", key="editor", value="neovim with lua config")
    await _save(client, category="tools", key="editor_plugins", value="telescope and treesitter")
    query = "preferences editor neovim with lua config"
    near = _distance(query, "preferences editor: neovim with lua config")
    far = _distance(query, "tools editor_plugins: telescope and treesitter")
    assert near < 0.3 < far  # the premise: one fact inside the cutoff, one outside

    found = (await client.get("/memory/facts/search", params={"q": query})).json()
    assert found["mode"] == "vector"
    assert [h["key"] for h in found["items"]] == ["editor"]  # "editor" also matches as text
    assert abs(found["items"][0]["score"] - (1 - near)) < 1e-3

    # nothing within the cutoff → the word search answers, and finds both
    loose = (await client.get("/memory/facts/search", params={"q": "editor"})).json()
    assert loose["mode"] == "text"
    assert {h["key"] for h in loose["items"]} == {"editor", "editor_plugins"}


async def test_text_search_ranks_by_matched_words(
    client: AsyncTestClient, ollama: FakeOllama
) -> None:
    await _save(client, category="work", key="employer", value="Acme in Berlin")
    await _save(client, category="location", key="home_city", value="Berlin")
    await _save(client, category="pets", key="dog", value="a beagle named Rex")
    ollama.fail("refuse")
    found = (
        await client.get("/memory/facts/search", params={"q": "the Acme office in Berlin"})
    ).json()
    assert found["mode"] == "text"
    keys = [h["key"] for h in found["items"]]
    assert keys[0] == "employer" and set(keys) == {"employer", "home_city"}
    limited = (await client.get("/memory/facts/search", params={"q": "berlin", "limit": 1})).json()
    assert len(limited["items"]) == 1
    # LIKE wildcards in the query are literal
    assert (await client.get("/memory/facts/search", params={"q": "%"})).json()["items"] == []
    underscore = (await client.get("/memory/facts/search", params={"q": "_"})).json()["items"]
    assert [h["key"] for h in underscore] == ["home_city"]  # a literal "_", not "any char"


def _has_trgm(db_url: str) -> bool:
    rows = sql(db_url, "SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
    return bool(rows)


async def test_typo_tolerance_follows_pg_trgm(
    client: AsyncTestClient, ollama: FakeOllama, db_url: str
) -> None:
    """With pg_trgm a misspelt word still finds the fact (`%>`); without it the search is
    plain ILIKE. Exercised on the embedded server (no pg_trgm) and the full one (CI)."""
    await _save(client, category="preferences", key="editor", value="neovim")
    ollama.fail("refuse")
    hits = (await client.get("/memory/facts/search", params={"q": "neovm"})).json()["items"]
    assert [h["key"] for h in hits] == (["editor"] if _has_trgm(db_url) else [])
    # a misspelt key too (key and value are matched as one text)
    hits = (await client.get("/memory/facts/search", params={"q": "editr"})).json()["items"]
    assert [h["key"] for h in hits] == (["editor"] if _has_trgm(db_url) else [])
    exact = (await client.get("/memory/facts/search", params={"q": "NEOVIM"})).json()["items"]
    assert [h["key"] for h in exact] == ["editor"]


async def test_trigram_indexes_serve_the_fallback(db_url: str) -> None:
    """When pg_trgm is installed, the word search can use the trigram GIN indexes."""
    if not _has_trgm(db_url):
        return  # embedded server: nothing to check, the ILIKE path is covered above
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            # on a cluster the shards are planned on the workers: the setting goes there too
            conn.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT id FROM memory_facts WHERE value ILIKE '%neovim%' OR value %> 'neovim'"
            )
        )
    assert "ix_trgm_memory_facts_value" in plan


async def test_memory_tool_actions(client: AsyncTestClient) -> None:
    async def call(**body):  # type: ignore[no-untyped-def]
        r = await client.post("/tools/memory", json=body)
        assert r.status_code == 200, r.text
        return r.json()

    out = await call(action="list")
    assert out["ok"] and out["categories"] == [] and out["text"] == "No facts saved yet."
    out = await call(
        action="save",
        category="preferences",
        key="editor",
        value="neovim",
        source="tool_call",
        expires_days=30,
        source_context="seen in ~/.config",
    )
    assert out["ok"] and out["fact"]["confidence"] == 95 and out["fact"]["expires_at"]
    assert out["text"].startswith("Saved [preferences] editor → neovim (confidence: 95%)")
    await call(action="save", category="preferences", key="shell", value="fish", confidence=30)
    await call(action="save", category="location", key="home_city", value="Porto")

    out = await call(action="list")
    assert out["categories"] == [
        {"category": "preferences", "count": 2},
        {"category": "location", "count": 1},
    ]
    assert "facts" not in out and out["text"] == (
        "Categories with saved facts: preferences (2), location (1)"
    )
    out = await call(action="search", query="preferences editor: neovim")
    assert [f["key"] for f in out["facts"]] == ["editor"]
    assert "• [preferences] editor → neovim (confidence: 95%, updated today)" in out["text"]
    out = await call(action="search", query="nothing like it", limit=3)
    assert out["facts"] == [] and out["text"].startswith("No saved facts match")

    out = await call(action="forget", key="editor", category="location")
    assert not out["ok"] and out["deleted"] == 0
    out = await call(action="forget", key="editor")
    assert out["ok"] and out["deleted"] == 1 and out["text"] == "Forgot 'editor'."


async def test_memory_tool_rejects_bad_calls_naming_the_field(client: AsyncTestClient) -> None:
    cases = [
        ({}, "action"),
        ({"action": "remember"}, "action"),
        ({"action": "save", "key": "k", "value": "v"}, "category"),
        ({"action": "save", "category": "c", "value": "v"}, "key"),
        ({"action": "save", "category": "c", "key": "k", "value": " "}, "value"),
        ({"action": "save", "category": "c", "key": "k" * 201, "value": "v"}, "key"),
        (
            {"action": "save", "category": "c", "key": "k", "value": "v", "confidence": -1},
            "confidence",
        ),
        ({"action": "save", "category": "c", "key": "k", "value": "v", "source": "web"}, "source"),
        (
            {"action": "save", "category": "c", "key": "k", "value": "v", "expires_days": "x"},
            "expires_days",
        ),
        ({"action": "search"}, "query"),
        ({"action": "search", "query": "x", "limit": 0}, "limit"),
        ({"action": "search", "query": "x" * 1001}, "query"),
        ({"action": "forget"}, "key"),
        ({"action": "list", "verbose": True}, "verbose"),
    ]
    for body, field in cases:
        r = await client.post("/tools/memory", json=body)
        assert r.status_code == 422, (body, r.status_code, r.text)
        assert field in r.json()["detail"], (field, r.json())


async def test_fact_hits_for_the_unified_search(
    client: AsyncTestClient,
    factory,
    llm,  # type: ignore[no-untyped-def]
) -> None:
    from app.domain.facts.memory_hits import search_fact_hits

    await _save(client, category="preferences", key="editor", value="neovim")
    async with factory() as db:
        hits = await search_fact_hits(db, llm, "admin", "preferences editor: neovim", 5)
        assert await search_fact_hits(db, llm, "admin", "  ", 5) == []
        assert await search_fact_hits(db, llm, "someone-else", "neovim", 5) == []
    assert [(h.source_type, h.text, h.category) for h in hits] == [
        ("fact", "editor: neovim", "preferences")
    ]
    assert hits[0].score is not None and hits[0].score > 0.99


async def test_unified_search_matches_fact_words_as_written(
    client: AsyncTestClient, ollama: FakeOllama, factory, llm, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    """memory_search's facts leg (the model's queries) matches words as written; the
    typo-tolerant match stays on GET /memory/facts/search (people's queries)."""
    from app.domain.facts.memory_hits import search_fact_hits

    await _save(client, category="preferences", key="editor", value="neovim")
    ollama.fail("refuse")  # no vectors: the word search decides
    try:
        async with factory() as db:
            assert [h.key for h in await search_fact_hits(db, llm, "admin", "neovim", 5)] == [
                "editor"
            ]
            assert await search_fact_hits(db, llm, "admin", "neovm", 5) == []
        typed = (await client.get("/memory/facts/search", params={"q": "neovm"})).json()["items"]
        assert [h["key"] for h in typed] == (["editor"] if _has_trgm(db_url) else [])
    finally:
        ollama.recover()
