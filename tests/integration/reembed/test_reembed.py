"""`reembed`: switching EMBEDDING_PROVIDER changes the vector columns and fills them.

The test databases are migrated with the default settings (ollama, vector(768)); these
tests re-embed them with the local model (384 dimensions)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import session_factory
from app.domain.reembed.commands import check_database_dimension, cmd_reembed
from app.domain.reembed.repositories import fact_text
from app.domain.reembed.services import ReembedError, dimension_mismatch, reembed
from app.lib.sql import vector_literal
from app.llm.factory import build_gateway
from app.llm.gateway import LLMGateway
from app.llm.local_embedder import LocalEmbedder

ROOT = Path(__file__).resolve().parents[3]

FACTS = [
    ("preferences", "editor_theme", "prefers a dark theme in the code editor"),
    ("work", "employer", "works at a bakery in Lyon"),
    ("health", "allergy", "is allergic to peanuts"),
    ("projects", "navi", "maintains a memory service for LLM agents"),
    ("hobbies", "music", "plays the violin on weekends"),
]
CHUNKS = [
    "user: the deploy failed because the database migration hit a lock timeout",
    "user: let's plan the trip to Kyoto in April, cherry blossoms",
    "assistant: to bake sourdough, feed the starter the night before",
    "user: my cat knocked the coffee off the desk again",
]


def _conn(url: str) -> psycopg.Connection:
    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))


def _seed(url: str, dim: int = 768) -> dict[str, int]:
    """Facts and chunks with old vectors (and some without); one hidden fact. A chunk's
    vectors are its segments' (`memory_chunk_vectors`)."""
    old = vector_literal([1.0] + [0.0] * (dim - 1))
    with _conn(url) as c:
        c.execute("INSERT INTO navi_users (id, name) VALUES ('u1', 'u1') ON CONFLICT DO NOTHING")
        ids = []
        for i, (cat, key, value) in enumerate(FACTS):
            row = c.execute(
                "INSERT INTO memory_facts (user_id, category, key, value, embedding) "
                "VALUES ('u1', %s, %s, %s, %s) RETURNING id",
                (cat, key, value, old if i % 2 == 0 else None),
            ).fetchone()
            assert row is not None
            ids.append(row[0])
        c.execute(
            "INSERT INTO memory_facts (user_id, category, key, value, merged_into) "
            "VALUES ('u1', 'hobbies', 'music_old', 'likes violin', %s)",
            (ids[4],),
        )
        session_id = uuid.uuid4()
        for i, content in enumerate(CHUNKS):
            chunk_id = uuid.uuid4()
            c.execute(
                "INSERT INTO memory_chunks (id, user_id, session_id, content, content_hash, "
                "start_seq, end_seq) VALUES (%s, 'u1', %s, %s, %s, %s, %s)",
                (chunk_id, session_id, content, f"h{i}", i, i),
            )
            if i % 2:
                c.execute(
                    "INSERT INTO memory_chunk_vectors (chunk_id, part, user_id, session_id, "
                    "start_char, end_char, embedding) VALUES (%s, 0, 'u1', %s, 0, %s, %s)",
                    (chunk_id, session_id, len(content), old),
                )
    return {"memory_facts": len(FACTS), "memory_chunks": len(CHUNKS)}


def _vector_columns(url: str) -> dict[str, int]:
    with _conn(url) as c:
        rows = c.execute(
            "SELECT c.relname || '.' || a.attname, a.atttypmod FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r' AND t.typname = 'vector' "
            "AND a.attnum > 0 AND NOT a.attisdropped"
        ).fetchall()
    return {name: mod for name, mod in rows}


def _dims(url: str, table: str, where: str = "true") -> list[int | None]:
    with _conn(url) as c:
        return [
            r[0] for r in c.execute(f"SELECT vector_dims(embedding) FROM {table} WHERE {where}")
        ]


def _chunk_segment_dims(url: str) -> list[list[int]]:
    """Per chunk (in id order): the dimensions of its segment vectors."""
    with _conn(url) as c:
        return [
            list(r[0])
            for r in c.execute(
                "SELECT coalesce((SELECT array_agg(vector_dims(v.embedding)) "
                "FROM memory_chunk_vectors v WHERE v.chunk_id = m.id AND v.user_id = m.user_id), '{}') "
                "FROM memory_chunks m ORDER BY m.id"
            )
        ]


def _hnsw_indexes(url: str) -> dict[str, str]:
    with _conn(url) as c:
        return {
            name: definition
            for name, definition in c.execute(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = 'public' AND indexdef ILIKE '%USING hnsw%'"
            )
        }


@pytest.fixture
def local_settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, embedding_provider="local")


@pytest.fixture
def factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return session_factory(engine)


@pytest.fixture
async def local_llm(local_settings: Settings) -> AsyncIterator[LLMGateway]:
    llm = build_gateway(local_settings)
    yield llm
    await llm.aclose()


async def test_reembed_changes_the_dimension_and_fills_vectors(
    db_url: str, factory: async_sessionmaker[AsyncSession], local_llm: LLMGateway
) -> None:
    counts = _seed(db_url)
    indexes_before = _hnsw_indexes(db_url)
    assert set(_vector_columns(db_url).values()) == {768}
    assert "memory_facts.embedding" in (await dimension_mismatch(factory, 384) or "")

    lines: list[str] = []
    result = await reembed(factory, local_llm, batch_size=2, progress=lines.append)

    assert result.error is None and result.dim == 384
    assert set(_vector_columns(db_url).values()) == {384}  # every vector column follows
    changed = {(c.table, c.column) for c in result.changes}
    assert {("memory_facts", "embedding"), ("memory_chunk_vectors", "embedding")} <= changed
    assert "memory_chunks.embedding" not in _vector_columns(db_url)  # no chunk-level vector
    assert result.embedded == counts and result.remaining == {t: 0 for t in counts}
    assert _dims(db_url, "memory_facts", "merged_into IS NULL") == [384] * len(FACTS)
    assert _dims(db_url, "memory_facts", "merged_into IS NOT NULL") == [None]  # hidden
    # every chunk is embedded per segment (at least one each, all 384-d)
    assert [set(d) for d in _chunk_segment_dims(db_url)] == [{384}] * len(CHUNKS)
    # the same indexes, re-created with the same definitions
    assert _hnsw_indexes(db_url) == indexes_before
    assert "ix_memory_facts_embedding_hnsw" in indexes_before
    assert any("memory_facts: 5/5" in line for line in lines)
    assert any("vector(768) -> vector(384)" in line for line in lines)
    assert await dimension_mismatch(factory, 384) is None

    # The vectors are the local model's, of the documented texts: search finds by meaning.
    model = LocalEmbedder()
    (query,) = model.encode(["which food is the user allergic to?"])
    with _conn(db_url) as c:
        key = c.execute(
            "SELECT key FROM memory_facts WHERE embedding IS NOT NULL "
            "ORDER BY embedding <=> %s::vector LIMIT 1",
            (vector_literal(query),),
        ).fetchone()
        stored = c.execute(
            "SELECT embedding::text FROM memory_facts WHERE key = 'employer'"
        ).fetchone()
        (chunk,) = model.encode(["the trip to Japan in spring"])
        content = c.execute(
            "SELECT m.content FROM memory_chunk_vectors v JOIN memory_chunks m ON m.id = v.chunk_id AND m.user_id = v.user_id "
            "ORDER BY v.embedding <=> %s::vector LIMIT 1",
            (vector_literal(chunk),),
        ).fetchone()
    assert key == ("allergy",)
    assert content is not None and "Kyoto" in content[0]
    (expected,) = model.encode([fact_text(*FACTS[1])])
    assert stored is not None
    got = [float(x) for x in stored[0].strip("[]").split(",")]
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < 1e-5


async def test_reembed_resumes_and_does_not_alter_twice(
    db_url: str, factory: async_sessionmaker[AsyncSession], local_llm: LLMGateway
) -> None:
    counts = _seed(db_url)
    first = await reembed(factory, local_llm, batch_size=2, limit=3)
    assert first.total_embedded == 3 and first.changes
    assert sum(first.remaining.values()) == sum(counts.values()) - 3
    embedded_after_first = [d for d in _dims(db_url, "memory_facts") if d is not None]
    assert embedded_after_first == [384, 384, 384]

    second = await reembed(factory, local_llm, batch_size=2)
    assert second.changes == []  # columns already vector(384): nothing cleared
    assert second.total_embedded == sum(counts.values()) - 3
    assert second.remaining == {t: 0 for t in counts}
    assert _dims(db_url, "memory_facts", "merged_into IS NULL") == [384] * len(FACTS)

    third = await reembed(factory, local_llm)
    assert third.total_embedded == 0 and third.changes == []


async def test_a_chunk_without_segment_vectors_is_the_one_left_to_embed(
    db_url: str, factory: async_sessionmaker[AsyncSession], local_llm: LLMGateway
) -> None:
    _seed(db_url)
    assert (await reembed(factory, local_llm)).remaining == {"memory_facts": 0, "memory_chunks": 0}
    with _conn(db_url) as c:
        c.execute(
            "DELETE FROM memory_chunk_vectors WHERE chunk_id = "
            "(SELECT id FROM memory_chunks WHERE content_hash = 'h2')"
        )
    again = await reembed(factory, local_llm)
    assert again.changes == [] and again.embedded == {"memory_facts": 0, "memory_chunks": 1}
    assert [set(d) for d in _chunk_segment_dims(db_url)] == [{384}] * len(CHUNKS)


async def test_two_runs_at_once_share_the_work(
    db_url: str, factory: async_sessionmaker[AsyncSession], local_llm: LLMGateway
) -> None:
    counts = _seed(db_url)
    a, b = await asyncio.gather(
        reembed(factory, local_llm, batch_size=1),
        reembed(factory, local_llm, batch_size=1),
    )
    assert a.error is None and b.error is None
    assert len(a.changes) + len(b.changes) == len(_vector_columns(db_url))  # altered once
    for table, n in counts.items():
        assert a.embedded[table] + b.embedded[table] == n  # no row embedded twice
    assert [set(d) for d in _chunk_segment_dims(db_url)] == [{384}] * len(CHUNKS)


async def test_unusable_embedder_changes_nothing(
    db_url: str, factory: async_sessionmaker[AsyncSession], settings: Settings, ollama
) -> None:
    _seed(db_url)
    ollama.fail("refuse")
    llm = build_gateway(dataclasses.replace(settings, embedding_dim=384))
    try:
        with pytest.raises(ReembedError, match="nothing was changed"):
            await reembed(factory, llm, probe_timeout=1.0)
    finally:
        await llm.aclose()
    assert set(_vector_columns(db_url).values()) == {768}
    assert _dims(db_url, "memory_facts", "embedding IS NOT NULL") == [768] * 3


def test_serve_start_up_check(db_url: str, settings: Settings) -> None:
    message = check_database_dimension(
        dataclasses.replace(settings, embedding_provider="local"), db_url
    )
    assert message is not None and "EMBEDDING_PROVIDER" in message and "reembed" in message
    assert check_database_dimension(settings, db_url) is None  # 768 = the default
    assert (
        check_database_dimension(dataclasses.replace(settings, embedding_provider="none"), db_url)
        is None
    )


def test_cli_reembed(db_url: str, tmp_path: Path) -> None:
    counts = _seed(db_url)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EMBEDDING_", "OLLAMA_", "NAVI_", "DATABASE_URL"))
    }
    env.update(
        DATABASE_URL=db_url,
        EMBEDDING_PROVIDER="local",
        NAVI_DATA_DIR=str(tmp_path / "data"),
        LOG_LEVEL="warning",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "reembed", "--batch-size", "3"],
        cwd=tmp_path,  # no .env from the work tree
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "vector(768) -> vector(384)" in proc.stderr
    assert "memory_chunks: 4/4 embedded" in proc.stderr
    assert f"embedded {sum(counts.values())} row(s)" in proc.stdout
    assert "0 still without a vector" in proc.stdout
    assert set(_vector_columns(db_url).values()) == {384}


def test_cli_refuses_provider_none(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(batch_size=None, limit=None)
    with pytest.raises(SystemExit) as exit_info:
        cmd_reembed(Settings(embedding_provider="none"), args)
    assert exit_info.value.code == 2
    assert "EMBEDDING_PROVIDER=none" in capsys.readouterr().err
