"""The prompt's fact list is capped (`PROMPT_FACTS`), and docs/memory.md says so."""

from __future__ import annotations

from pathlib import Path

from app.db.engine import session_factory, transaction
from app.domain.facts.prompt_notes import PROMPT_FACTS, memory_notes
from app.domain.facts.services import FactService
from app.llm.factory import build_gateway

ROOT = Path(__file__).resolve().parents[3]


async def test_the_prompt_lists_at_most_the_capped_number_of_facts(
    client, engine, settings
) -> None:  # type: ignore[no-untyped-def]
    for n in range(PROMPT_FACTS + 5):
        r = await client.post(
            "/memory/facts",
            json={
                "category": "technical",
                "key": f"host_{n}",
                "value": f"machine number {n}",
                "confidence": 50 + n,
            },
        )
        assert r.status_code == 201, r.text
    llm = build_gateway(settings)
    try:
        async with transaction(session_factory(engine)) as db:
            _, listed = await memory_notes(FactService(db, llm), "admin", "")
    finally:
        await llm.aclose()
    assert listed is not None
    lines = listed.splitlines()
    assert len(lines) == PROMPT_FACTS
    # no message to match: the most confident ones
    assert "host_24 " in lines[0] and not any("host_4 " in line for line in lines)


def test_docs_name_the_cap_and_why() -> None:
    doc = (ROOT / "docs" / "memory.md").read_text()
    assert f"**At most {PROMPT_FACTS} facts** (`PROMPT_FACTS`" in doc
    assert "the cap is ours" in doc


async def test_the_prompt_marks_a_recently_changed_fact_with_its_previous_value(
    client, engine, settings, db_url
) -> None:  # type: ignore[no-untyped-def]
    from tests.integration.facts.conftest import sql

    for key, value in [("city", "Lyon"), ("city", "Berlin"), ("cat", "Mimi"), ("old", "a")]:
        r = await client.post(
            "/memory/facts", json={"category": "home", "key": key, "value": value}
        )
        assert r.status_code == 201, r.text
    r = await client.post("/memory/facts", json={"category": "home", "key": "old", "value": "b"})
    # a change older than CHANGED_WITHIN_DAYS is not marked
    sql(
        db_url,
        # in UTC wall time: Citus takes no STABLE function of a column in an UPDATE
        "update fact_versions"
        " set valid_from = ((valid_from at time zone 'UTC') - interval '40 days')"
        " at time zone 'UTC',"
        " valid_to = ((valid_to at time zone 'UTC') - interval '40 days') at time zone 'UTC'"
        " where user_id = 'admin' and key = 'old'",
    )
    llm = build_gateway(settings)
    try:
        async with transaction(session_factory(engine)) as db:
            _, listed = await memory_notes(FactService(db, llm), "admin", "")
    finally:
        await llm.aclose()
    assert listed is not None
    lines = {line.split("]")[1].split("→")[0].strip(): line for line in listed.splitlines()}
    assert ", was: Lyon)" in lines["city"] and "changed 20" in lines["city"]
    assert "was:" not in lines["cat"] and "was:" not in lines["old"]


def test_docs_name_the_change_marks_bounds() -> None:
    from app.domain.facts.prompt_notes import CHANGED_MARKS, CHANGED_WITHIN_DAYS

    doc = (ROOT / "docs" / "memory.md").read_text()
    assert f"`CHANGED_WITHIN_DAYS` = {CHANGED_WITHIN_DAYS}" in doc
    assert f"`CHANGED_MARKS` = {CHANGED_MARKS}" in doc
