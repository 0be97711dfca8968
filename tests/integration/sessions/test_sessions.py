import asyncio

from litestar.testing import AsyncTestClient

from tests.conftest import legacy_session, new_user, run_sql


async def _session(client: AsyncTestClient, headers=None, **body) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions", json={"profile_id": "default", **body}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _append(client, sid, messages, headers=None):  # type: ignore[no-untyped-def]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["messages"]


async def test_dual_buffer_round_trip(client: AsyncTestClient) -> None:
    sid = await _session(client, name="Trip")
    refs = await _append(
        client,
        sid,
        [
            {"role": "user", "content": "hello", "metadata": {"k": 1}},
            {
                "role": "assistant",
                "content": "",
                "thinking": "hmm",
                "tool_calls": [{"function": {"name": "ls", "arguments": {"p": "/"}}}],
                "tool_call_count": 1,
            },
            {
                "role": "tool",
                "content": "a b",
                "name": "ls",
                "tool_call_id": "c1",
                "is_compression_critical": True,
            },
            {"role": "user", "content": "old summary", "is_summary": True, "is_display": False},
            {
                "role": "assistant",
                "content": "plan",
                "is_plan": True,
                "is_context": False,
                "elapsed_seconds": 1.5,
                "token_count": 7,
            },
        ],
    )
    assert [r["sequence_number"] for r in refs] == [0, 1, 2, 3, 4]
    assert [r["display_index"] for r in refs] == [0, 1, 2, None, 3]
    hist = (await client.get(f"/sessions/{sid}/messages")).json()
    assert [m["content"] for m in hist["messages"]] == ["hello", "", "a b", "plan"]
    m = hist["messages"]
    assert m[0]["metadata"] == {"k": 1} and m[1]["thinking"] == "hmm"
    assert m[1]["tool_calls"][0]["function"]["name"] == "ls"
    assert m[2]["is_compression_critical"] and m[2]["name"] == "ls" and m[2]["tool_call_id"] == "c1"
    assert m[3]["is_plan"] and m[3]["is_context"] is False and m[3]["elapsed_seconds"] == 1.5
    ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
    # context is rebuilt from is_context: the summary (not displayed) is in, the plan is out
    assert [c["content"] for c in ctx] == ["hello", "", "a b", "old summary"]
    s = (await client.get(f"/sessions/{sid}")).json()
    assert s["display_message_count"] == 4 and s["name"] == "Trip"


async def test_system_records_reach_llm_only_from_allowlist(client: AsyncTestClient) -> None:
    sid = await _session(client)
    await _append(
        client,
        sid,
        [
            {"role": "system", "content": "note", "metadata": {"source": "task_note"}},
            {"role": "system", "content": "event", "metadata": {"source": "synapse_event"}},
            {"role": "system", "content": "other", "metadata": {"source": "debug"}},
            {"role": "system", "content": "plain"},
            {
                "role": "system",
                "content": "compressed",
                "is_compression": True,
                "is_context": False,
            },
        ],
    )
    ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
    assert [c["content"] for c in ctx] == ["note", "event"]
    hist = (await client.get(f"/sessions/{sid}/messages")).json()["messages"]
    assert len(hist) == 5  # all kept in the transcript


async def test_32_concurrent_appends(client: AsyncTestClient) -> None:
    sid = await _session(client)

    async def one(i: int):  # type: ignore[no-untyped-def]
        return await _append(
            client,
            sid,
            [{"role": "user", "content": f"r{i}-a"}, {"role": "assistant", "content": f"r{i}-b"}],
        )

    results = await asyncio.gather(*(one(i) for i in range(32)))
    seqs = sorted(r["sequence_number"] for res in results for r in res)
    assert seqs == list(range(64))
    for res in results:  # each request got consecutive numbers, in request order
        assert res[1]["sequence_number"] == res[0]["sequence_number"] + 1
    hist = (await client.get(f"/sessions/{sid}/messages?limit=200")).json()["messages"]
    assert len(hist) == 64
    assert [m["display_index"] for m in hist] == list(range(64))
    by_seq = {m["sequence_number"]: m["content"] for m in hist}
    for i, res in enumerate(results):
        assert by_seq[res[0]["sequence_number"]] == f"r{i}-a"
        assert by_seq[res[1]["sequence_number"]] == f"r{i}-b"


async def test_append_is_atomic_and_validated(client: AsyncTestClient, settings) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": []})
    assert r.status_code == 422 and "messages" in r.json()["detail"]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [{"role": "wizard"}]})
    assert r.status_code == 422 and "role" in r.json()["detail"]
    big = "x" * (settings.message_max_chars + 1)
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": big}]},
    )
    assert r.status_code == 413 and "messages[1].content" in r.json()["detail"]
    # nothing of the failed request was stored, and numbering continues without a gap
    refs = await _append(client, sid, [{"role": "user", "content": "first"}])
    assert refs[0]["sequence_number"] == 0


async def test_list_paging_sorting_and_summaries(client: AsyncTestClient) -> None:
    ids = []
    for i in range(5):
        sid = await _session(client, name=f"s{i}", profile_id="code" if i % 2 else "default")
        await _append(client, sid, [{"role": "user", "content": f"message {i}"}] * (i + 1))
        ids.append(sid)
    await client.patch(f"/sessions/{ids[0]}", json={"pinned": True})
    page = (await client.get("/sessions?limit=2")).json()
    assert page["total"] == 5 and page["has_more"] is True and len(page["items"]) == 2
    assert page["items"][0]["id"] == ids[0]  # pinned first
    assert page["items"][1]["id"] == ids[4]  # then most recently active
    assert page["items"][1]["display_message_count"] == 5
    assert page["items"][1]["preview"] == "message 4"
    last = (await client.get("/sessions?limit=2&offset=4")).json()
    assert len(last["items"]) == 1 and last["has_more"] is False
    empty = (await client.get("/sessions?limit=2&offset=50")).json()
    assert empty["items"] == [] and empty["total"] == 5 and empty["has_more"] is False
    by_name = (await client.get("/sessions?sort_by=name&sort_order=asc")).json()["items"]
    assert [s["name"] for s in by_name] == ["s0", "s1", "s2", "s3", "s4"]
    code = (await client.get("/sessions?profile_id=code")).json()
    assert code["total"] == 2 and {s["profile_id"] for s in code["items"]} == {"code"}


async def test_bad_list_parameters_are_422_naming_the_field(client: AsyncTestClient) -> None:
    for query, field in [
        ("sort_by=size", "sort_by"),
        ("sort_order=sideways", "sort_order"),
        ("limit=0", "limit"),
        ("limit=100000", "limit"),
        ("offset=-1", "offset"),
    ]:
        r = await client.get(f"/sessions?{query}")
        assert r.status_code == 422, (query, r.text)
        assert field in r.json()["detail"], (query, r.json())


async def test_search_is_literal(client: AsyncTestClient) -> None:
    a = await _session(client, name="a")
    b = await _session(client, name="b")
    c = await _session(client, name="c")
    await _append(client, a, [{"role": "user", "content": "discount 100% off"}])
    await _append(client, b, [{"role": "user", "content": "file_name and C:\\path"}])
    await _append(client, c, [{"role": "user", "content": "discount 1000 off, filename"}])

    async def names(q: str) -> set[str]:
        r = await client.get("/sessions", params={"search": q})
        assert r.status_code == 200
        return {s["name"] for s in r.json()["items"]}

    assert await names("100%") == {"a"}
    assert await names("file_name") == {"b"}
    assert await names("C:\\path") == {"b"}
    assert await names("DISCOUNT") == {"a", "c"}
    assert await names("%") == {"a"}
    assert await names("_") == {"b"}


async def test_search_matches_positions_and_snippets(client: AsyncTestClient, db_url: str) -> None:
    a = await _session(client)
    b = await _session(client)
    await _append(
        client,
        a,
        [
            {"role": "user", "content": "the Port is 8080"},
            {"role": "user", "content": "hidden port", "is_display": False},
            {"role": "assistant", "content": "nothing"},
            {"role": "assistant", "content": "port again"},
        ],
    )
    await _append(client, b, [{"role": "user", "content": "no match"}])
    r = await client.get("/sessions/matches", params={"q": "port", "session_id": [a, b]})
    assert r.status_code == 200, r.text
    sessions = r.json()["sessions"]
    assert len(sessions) == 1 and sessions[0]["session_id"] == a
    assert sessions[0]["positions"] == [0, 2] and sessions[0]["match_count"] == 2
    assert "Port is 8080" in sessions[0]["snippet"]
    # archived rows keep their positions
    run_sql(db_url, "update session_messages set is_context = false where session_id = %s", a)
    r = await client.get("/sessions/matches", params={"q": "port", "session_id": [a]})
    assert r.json()["sessions"][0]["positions"] == [0, 2]
    r = await client.get("/sessions/matches", params={"q": " ", "session_id": [a]})
    assert r.status_code == 422


async def test_archive_read_through(client: AsyncTestClient, engine) -> None:  # type: ignore[no-untyped-def]
    from app.db.engine import session_factory, transaction
    from app.domain.sessions.message_repository import MessageRepository

    sid = await _session(client)
    await _append(
        client, sid, [{"role": "user", "content": f"m{i}", "is_context": i >= 8} for i in range(12)]
    )
    import uuid

    from sqlalchemy import text as sql_text

    async with transaction(session_factory(engine)) as db:
        repo = MessageRepository(db)
        owner = (
            await db.execute(sql_text("SELECT user_id FROM sessions WHERE id = :id"), {"id": sid})
        ).scalar_one()
        moved = await repo.archive_old_messages(owner, uuid.UUID(sid), 10)
        assert moved == 8  # rows still in context stay hot
        archived = await repo.get_archived_messages(
            owner, uuid.UUID(sid), before_seq=None, limit=100
        )
        assert len(archived) == 8
        assert await repo.hot_message_count(owner, uuid.UUID(sid)) == 4
    page1 = (await client.get(f"/sessions/{sid}/messages?limit=5")).json()
    assert [m["content"] for m in page1["messages"]] == ["m7", "m8", "m9", "m10", "m11"]
    assert page1["has_more"] and page1["next_before_seq"] == 7
    assert page1["messages"][0]["archived"] is True and page1["messages"][-1]["archived"] is False
    page2 = (await client.get(f"/sessions/{sid}/messages?limit=5&before_seq=7")).json()
    assert [m["content"] for m in page2["messages"]] == ["m2", "m3", "m4", "m5", "m6"]
    page3 = (await client.get(f"/sessions/{sid}/messages?limit=5&before_seq=2")).json()
    assert [m["content"] for m in page3["messages"]] == ["m0", "m1"]
    assert page3["has_more"] is False and page3["next_before_seq"] is None
    ctx = (await client.get(f"/sessions/{sid}/context")).json()["messages"]
    assert [m["content"] for m in ctx] == ["m8", "m9", "m10", "m11"]


async def test_set_context_flag_ignores_is_display(client: AsyncTestClient, engine) -> None:  # type: ignore[no-untyped-def]
    import uuid

    from app.db.engine import session_factory, transaction
    from app.domain.sessions.message_repository import MessageRepository

    sid = await _session(client)
    await _append(
        client,
        sid,
        [
            {"role": "user", "content": "q"},
            {"role": "user", "content": "summary", "is_summary": True, "is_display": False},
        ],
    )
    from sqlalchemy import text as sql_text

    async with transaction(session_factory(engine)) as db:
        owner = (
            await db.execute(sql_text("SELECT user_id FROM sessions WHERE id = :id"), {"id": sid})
        ).scalar_one()
        n = await MessageRepository(db).set_context_flag(owner, uuid.UUID(sid), [0, 1], False)
    assert n == 2
    assert (await client.get(f"/sessions/{sid}/context")).json()["messages"] == []


async def test_planning_logs(client: AsyncTestClient) -> None:
    sid = await _session(client)
    for i in range(3):
        r = await client.post(f"/sessions/{sid}/planning", json={"entry": {"step": i}})
        assert r.status_code == 204
    logs = (await client.get(f"/sessions/{sid}/planning")).json()["planning_logs"]
    assert logs == [{"step": 0}, {"step": 1}, {"step": 2}]
    page = (await client.get(f"/sessions/{sid}/planning", params={"limit": 2})).json()
    assert page["planning_logs"] == [{"step": 0}, {"step": 1}]
    assert (page["total"], page["limit"], page["offset"], page["has_more"]) == (3, 2, 0, True)
    page = (await client.get(f"/sessions/{sid}/planning", params={"offset": 2})).json()
    assert page["planning_logs"] == [{"step": 2}] and not page["has_more"]
    r = await client.get(f"/sessions/{sid}/planning", params={"limit": 0})
    assert r.status_code == 422 and "limit" in r.json()["detail"]


async def test_delete_cascades(client: AsyncTestClient, db_url: str, settings) -> None:  # type: ignore[no-untyped-def]
    sid = await _session(client)
    await _append(
        client, sid, [{"role": "user", "content": f"m{i}", "is_context": False} for i in range(4)]
    )
    run_sql(
        db_url,
        "insert into session_messages_archive (session_id, user_id, sequence_number, role, content)"
        " select id, user_id, 100, 'user', 'old' from sessions where id = %s",
        sid,
    )
    run_sql(
        db_url,
        "insert into session_shares (session_id, user_id, token, token_hash)"
        " select id, user_id, 't', 'h' from sessions where id = %s",
        sid,
    )
    run_sql(
        db_url,
        "insert into memory_chunks (id, user_id, session_id, content, content_hash, start_seq, end_seq)"
        " select gen_random_uuid(), user_id, id, 'c', 'x', 0, 1 from sessions where id = %s",
        sid,
    )
    files = settings.data_path / "session_files" / sid
    files.mkdir(parents=True)
    (files / "a.txt").write_text("x")
    assert (await client.delete(f"/sessions/{sid}")).status_code == 204
    for table in (
        "session_messages",
        "session_messages_archive",
        "session_shares",
        "memory_chunks",
    ):
        assert (
            run_sql(db_url, f"select count(*) from {table} where session_id = %s", sid)[0][0] == 0
        ), table
    assert not files.exists()
    assert (await client.get(f"/sessions/{sid}")).status_code == 404
    assert (await client.delete(f"/sessions/{sid}")).status_code == 404


async def test_someone_elses_session_is_404_everywhere(client: AsyncTestClient) -> None:
    _, alice = await new_user(client, "alice")
    _, bob = await new_user(client, "bob")
    sid = await _session(client, headers=alice)
    await _append(client, sid, [{"role": "user", "content": "secret"}], headers=alice)
    calls = [
        ("GET", f"/sessions/{sid}", None),
        ("PATCH", f"/sessions/{sid}", {"name": "x"}),
        ("DELETE", f"/sessions/{sid}", None),
        ("POST", f"/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "x"}]}),
        ("GET", f"/sessions/{sid}/messages", None),
        ("GET", f"/sessions/{sid}/context", None),
        ("GET", f"/sessions/{sid}/planning", None),
        ("POST", f"/sessions/{sid}/planning", {"entry": {}}),
    ]
    for method, path, body in calls:
        r = await client.request(method, path, json=body, headers=bob)
        assert r.status_code == 404, (method, path, r.status_code)
    assert (await client.get("/sessions", headers=bob)).json()["total"] == 0
    r = await client.get(
        "/sessions/matches", params={"q": "secret", "session_id": [sid]}, headers=bob
    )
    assert r.json()["sessions"] == []
    # still intact for alice
    assert (await client.get(f"/sessions/{sid}/messages", headers=alice)).json()["messages"][0][
        "content"
    ] == "secret"


async def test_legacy_admin_and_read_all(client: AsyncTestClient, db_url: str) -> None:
    _, alice = await new_user(client, "alice")
    _, reader = await new_user(client, "reader", permissions=["navi.sessions.read_all"])
    mine = await _session(client, headers=alice)
    legacy = legacy_session(db_url, "default")
    alice_ids = {s["id"] for s in (await client.get("/sessions", headers=alice)).json()["items"]}
    assert alice_ids == {mine}
    assert (await client.get(f"/sessions/{legacy}", headers=alice)).status_code == 404
    for h in (reader, None):  # read_all holder and the admin see both
        ids = {s["id"] for s in (await client.get("/sessions", headers=h)).json()["items"]}
        assert {mine, legacy} <= ids
        assert (await client.get(f"/sessions/{legacy}", headers=h)).status_code == 200


async def test_read_all_reads_but_changes_nothing(client: AsyncTestClient, db_url: str) -> None:
    """navi.sessions.read_all grants reading only: every write is 403 (it may see the
    session), and nothing changed; the owner and the admin still may."""
    _, alice = await new_user(client, "alice")
    _, reader = await new_user(client, "reader", permissions=["navi.sessions.read_all"])
    sid = await _session(client, headers=alice, name="mine")
    await _append(client, sid, [{"role": "user", "content": "hello"}], headers=alice)
    legacy = legacy_session(db_url, "default")
    before = (await client.get(f"/sessions/{sid}", headers=alice)).json()
    writes = [
        ("PATCH", f"/sessions/{sid}", {"name": "renamed"}),
        ("PATCH", f"/sessions/{sid}", {}),
        ("POST", f"/sessions/{sid}/messages", {"messages": [{"role": "user", "content": "x"}]}),
        ("POST", f"/sessions/{sid}/planning", {"entry": {"x": 1}}),
        ("POST", f"/sessions/{sid}/compact", None),
        ("POST", f"/sessions/{sid}/prepare", {"message": {"content": "x"}}),
        ("PUT", f"/sessions/{sid}/scratchpad/notes", {"value": "x"}),
        ("DELETE", f"/sessions/{sid}/scratchpad/notes", None),
        ("POST", f"/sessions/{sid}/share", None),
        ("DELETE", f"/sessions/{sid}", None),
        ("DELETE", f"/sessions/{legacy}", None),  # ownerless: readable, not changeable
    ]
    for method, path, body in writes:
        r = await client.request(method, path, json=body, headers=reader)
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert r.json()["error"] == "forbidden"
        assert "owner or an admin" in r.json()["detail"], r.text
    r = await client.post(
        f"/sessions/{sid}/files", files={"files": ("a.txt", b"x", "text/plain")}, headers=reader
    )
    assert r.status_code == 403
    after = (await client.get(f"/sessions/{sid}", headers=reader)).json()
    assert after == before  # name, counts, last_active: untouched
    assert (await client.get(f"/sessions/{sid}/planning", headers=alice)).json()[
        "planning_logs"
    ] == []
    assert (await client.get(f"/sessions/{sid}/files", headers=alice)).json()["total"] == 0
    # an unknown session is still 404 for the reader, and the owner and the admin may write
    r = await client.delete("/sessions/00000000-0000-0000-0000-000000000000", headers=reader)
    assert r.status_code == 404
    r = await client.patch(f"/sessions/{sid}", json={"name": "owner's"}, headers=alice)
    assert r.status_code == 200
    assert (await client.patch(f"/sessions/{legacy}", json={"name": "adm"})).status_code == 200
    assert (await client.delete(f"/sessions/{sid}")).status_code == 204


async def test_anonymous_mode_sessions(anon_client: AsyncTestClient, db_url: str) -> None:
    sid = await _session(anon_client)
    assert (await anon_client.get(f"/sessions/{sid}")).json()["user_id"] == "anonymous"
    legacy = legacy_session(db_url, "default")
    assert (await anon_client.get(f"/sessions/{legacy}")).status_code == 200  # checks bypassed


async def test_unknown_session_and_bad_ids(client: AsyncTestClient) -> None:
    r = await client.get("/sessions/00000000-0000-0000-0000-000000000000")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert (await client.get("/sessions/not-a-uuid")).status_code == 404
    r = await client.post("/sessions", json={"profile_id": ""})
    assert r.status_code == 422 and "profile_id" in r.json()["detail"]
    r = await client.post("/sessions", json={"profile_id": "default", "name": "n" * 201})
    assert r.status_code == 422 and "name" in r.json()["detail"]
