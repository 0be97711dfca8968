"""The raw chunks' search indexes: the user-keyed text index (`term_matches`, migration
2026_12_01_0730) and the segment vectors' HNSW graph per user bucket (`nearest_segments`,
migration 2026_12_01_0800)."""

import hashlib
import uuid
from datetime import UTC, datetime

from sqlalchemy import text

from app.db.citus import SHARD_HNSW_INDEX
from app.db.engine import session_factory, transaction
from app.db.models.memory import CHUNK_USER_TSV, SEGMENT_BUCKETS
from app.domain.kernel.access import Viewer
from app.domain.raw_history.chunk_writer_repository import ChunkWriter
from app.domain.raw_history.chunks import RawChunk
from app.domain.raw_history.repositories import ChunkRepository, user_bucket
from app.domain.raw_history.search_cache import CommonTerms
from app.domain.sessions.repositories import SessionRepository

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _chunk(content: str, n: int, crumbs: tuple[str, ...] = ()) -> RawChunk:
    digest = hashlib.sha256(content.encode()).hexdigest()
    return RawChunk(content, n, n, T0, T0, digest, crumbs)


async def _store(db, user_id: str, contents, crumbs=()) -> list[str]:  # type: ignore[no-untyped-def]
    writer = ChunkWriter(db)
    sid = uuid.uuid4()
    chunks = [_chunk(c, n, crumbs) for n, c in enumerate(contents)]
    await writer.add_chunks(user_id, sid, chunks, [[]] * len(chunks))
    rows = await db.execute(
        text("SELECT id FROM memory_chunks WHERE session_id = :s ORDER BY start_seq"), {"s": sid}
    )
    return [str(i) for i in rows.scalars()]  # term_matches gives ids as text


async def _segment_dim(db) -> int:  # type: ignore[no-untyped-def]
    """The segment vectors' dimension (the test database's embedder's)."""
    return int(
        (
            await db.execute(
                text(
                    "SELECT atttypmod FROM pg_attribute WHERE attname = 'embedding' "
                    "AND attrelid = 'memory_chunk_vectors'::regclass"
                )
            )
        ).scalar_one()
    )


async def _on_cluster(db) -> bool:  # type: ignore[no-untyped-def]
    """A Citus coordinator: one HNSW graph per shard instead of one per user bucket
    (migration d8f3b2a6c4e1). Its `SET LOCAL`s below reach the workers, where the
    user's shard is read."""
    found = (await db.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'"))).first()
    if found is not None:
        await db.execute(text("SET LOCAL citus.propagate_set_commands = 'local'"))
        # a shard's one graph also holds its other users' vectors: on these tiny tables
        # a sort of the user's rows (by the primary key's `user_id`) is cheaper still
        await db.execute(text("SET LOCAL enable_sort = off"))
    return found is not None


async def test_term_matches_is_scoped_to_the_user(engine) -> None:  # type: ignore[no-untyped-def]
    async with transaction(session_factory(engine)) as db:
        for uid in ("alice", "bob"):
            await db.execute(text("INSERT INTO navi_users (id, name) VALUES (:u, :u)"), {"u": uid})
        a = await _store(
            db,
            "alice",
            [
                "User: deploy katori to /srv/katori/app.conf",
                "Assistant: the ab test ran; abc is unrelated. Привет, мир",
                "Tool result (shell): nothing here",
            ],
            crumbs=("INV-2291",),
        )
        b = await _store(db, "bob", ["User: katori deployment ab abc"])

        repo = ChunkRepository(db)
        terms = ["kato", "conf", "ab", "приве", "2291", "deploy", "zzz"]
        assert (await repo.begin_search("alice", session_id=None)).chunks == 3
        found = await repo.term_matches("alice", terms, session_id=None, cap=10)
        got = dict(zip(terms, (set(f) for f in found), strict=True))
        assert got["kato"] == {a[0]}  # a prefix, and never bob's chunk
        assert got["conf"] == {a[0]}  # punctuation splits the path
        assert got["ab"] == {a[1]}  # a short term is a whole word: not `abc`
        assert got["приве"] == {a[1]}  # other scripts match as prefixes too
        assert got["2291"] == set(a)  # breadcrumbs are searched (every chunk has them)
        assert got["zzz"] == set()

        found = await repo.term_matches("bob", ["kato", "ab"], session_id=None, cap=10)
        assert (await repo.begin_search("bob", session_id=None)).chunks == 1 and found == [b, b]
        # the cap bounds the ids read per term
        found = await repo.term_matches("alice", ["2291"], session_id=None, cap=2)
        assert len(found[0]) == 2


async def test_term_lookup_uses_the_user_keyed_index(engine) -> None:  # type: ignore[no-untyped-def]
    async with transaction(session_factory(engine)) as db:
        # An empty table plans a user's btree range; without it (this test's own
        # database) the query must still be answerable from the GIN index: the
        # expressions match.
        await db.execute(text("DROP INDEX ix_memory_chunks_user_session_ended"))
        # the primary and unique keys hold user_id too (the tenant key): on an empty
        # table a scan of either is as cheap; without them too the GIN index must answer
        for key in ("uq_memory_chunks_session_id_content_hash_user_id", "pk_memory_chunks"):
            await db.execute(text(f"ALTER TABLE memory_chunks DROP CONSTRAINT {key} CASCADE"))
        await _on_cluster(db)  # the settings below reach the shard's worker too
        await db.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            (
                await db.execute(
                    text(
                        "EXPLAIN SELECT id FROM memory_chunks WHERE user_id = 'alice' AND "
                        "search_terms @@ navi_user_tsquery('alice', "
                        "to_tsquery('simple', 'kato:*'))"
                    )
                )
            ).scalars()
        )
        assert "ix_memory_chunks_user_terms" in plan
        # the key goes in front of every lexeme of the query, prefix marks kept
        q = (
            await db.execute(
                text("SELECT navi_user_tsquery('alice', to_tsquery('simple', 'kato:* & ab'))::text")
            )
        ).scalar_one()
        key = hashlib.md5(b"alice").hexdigest()[:8]
        assert q == f"'{key}kato':* & '{key}ab'"


async def test_a_small_users_term_lookup_reads_the_stored_lexemes(engine) -> None:  # type: ignore[no-untyped-def]
    """A user with a few chunks: the planner reads the user's btree range, and each row is
    matched on its stored lexemes, not by re-parsing its text (~1 ms a chunk)."""
    async with transaction(session_factory(engine)) as db:
        content = "the deploy of kato2291 went fine " * 40
        await db.execute(text("INSERT INTO navi_users (id, name) VALUES ('carol', 'carol')"))
        ids = await _store(db, "carol", [content, "nothing here"])
        stored, computed = (
            await db.execute(
                text(
                    f"SELECT search_terms::text, ({CHUNK_USER_TSV})::text FROM memory_chunks "
                    "WHERE user_id = 'carol' AND id = CAST(:id AS uuid)"
                ),
                {"id": ids[0]},
            )
        ).one()
        assert stored == computed and "kato2291" in stored
        await _on_cluster(db)
        await db.execute(text("SET LOCAL enable_bitmapscan = off"))  # the btree range
        await db.execute(text("SET LOCAL enable_seqscan = off"))
        found = await ChunkRepository(db).term_matches(
            "carol", ["kato2291"], session_id=None, cap=10
        )
        assert found == [[ids[0]]]
        plan = "\n".join(
            (
                await db.execute(
                    text(
                        "EXPLAIN SELECT id FROM memory_chunks WHERE user_id = 'carol' AND "
                        "search_terms @@ navi_user_tsquery('carol', to_tsquery('simple', 'x'))"
                    )
                )
            ).scalars()
        )
        assert "navi_chunk_user_tsv" not in plan, plan


async def test_nearest_segments_walk_the_users_bucket_graph(engine) -> None:  # type: ignore[no-untyped-def]
    users = [f"user-{n}" for n in range(1000)]  # enough names to fill every bucket
    async with transaction(session_factory(engine)) as db:
        # Python's bucket is the SQL one
        got = await db.execute(
            text("SELECT u, navi_user_bucket(u) FROM unnest(CAST(:us AS text[])) AS u"),
            {"us": users},
        )
        assert dict(got.all()) == {u: user_bucket(u) for u in users}
        assert {user_bucket(u) for u in users} == set(range(SEGMENT_BUCKETS))

        dim = await _segment_dim(db)
        repo, writer = ChunkRepository(db), ChunkWriter(db)
        vec = [1.0] + [0.0] * (dim - 1)
        far = [0.0, 1.0] + [0.0] * (dim - 2)
        for uid in ("alice", "bob"):
            await db.execute(text("INSERT INTO navi_users (id, name) VALUES (:u, :u)"), {"u": uid})
        sid = uuid.uuid4()
        for uid, v in (("alice", vec), ("bob", vec), ("alice", far)):
            chunk = _chunk(f"User: a chunk of {uid} {v[0]}", 0)
            await writer.add_chunks(uid, sid, [chunk], [[(0, 10, v)]])
        near = await repo.nearest_segments("alice", vec, session_id=None, limit=5)
        assert [round(s, 3) for _, s in near] == [1.0, 0.0]  # alice's only, nearest first
        exact = await repo.nearest_segments("alice", vec, session_id=None, limit=5, exact=True)
        assert [c for c, _ in exact] == [c for c, _ in near]

        # the graph walked is the one of alice's bucket (seq scan off: the table is tiny);
        # on a cluster the one graph of alice's shard, the statement on that shard only
        cluster = await _on_cluster(db)
        await db.execute(text("SET LOCAL enable_seqscan = off"))
        await db.execute(text("DROP INDEX ix_memory_chunk_vectors_user_session"))
        v = "[" + ",".join(map(str, vec)) + "]"
        bucket = "" if cluster else f" AND navi_user_bucket(user_id) = {user_bucket('alice')}"
        plan = "\n".join(
            (
                await db.execute(
                    text(
                        "EXPLAIN SELECT chunk_id FROM memory_chunk_vectors WHERE user_id = "
                        f"'alice'{bucket} ORDER BY embedding <=> '{v}' LIMIT 5"
                    )
                )
            ).scalars()
        )
        if cluster:
            assert "Task Count: 1" in plan and f"Index Scan using {SHARD_HNSW_INDEX}_" in plan
        else:
            assert f"ix_memory_chunk_vectors_hnsw_b{user_bucket('alice'):02d}" in plan


async def test_chunk_counts_follow_inserts_and_deletes(engine) -> None:  # type: ignore[no-untyped-def]
    """`memory_chunk_counts` (kept by the app's chunk writes, migration c5a1d9e3f7b2)
    always equals a count of the user's chunks: after inserts, a session's delete, a
    user's cascade."""

    async def counts(db) -> tuple[dict[str, int], dict[str, int]]:  # type: ignore[no-untyped-def]
        kept = dict(
            (await db.execute(text("SELECT user_id, chunks FROM memory_chunk_counts"))).all()
        )
        real = dict(
            (
                await db.execute(
                    text(
                        "SELECT user_id, count(*) FROM memory_chunks WHERE user_id IS NOT NULL"
                        " GROUP BY user_id"
                    )
                )
            ).all()
        )
        return {u: n for u, n in kept.items() if n}, real

    async with transaction(session_factory(engine)) as db:
        for uid in ("carol", "dave"):
            await db.execute(text("INSERT INTO navi_users (id, name) VALUES (:u, :u)"), {"u": uid})
        await _store(db, "carol", ["User: one", "User: two", "User: three"])
        doomed = await SessionRepository(db).create("default", "carol", None)
        await ChunkWriter(db).add_chunks("carol", doomed.id, [_chunk("User: four", 0, ())], [[]])
        await _store(db, "dave", ["User: five", "User: six"])
        kept, real = await counts(db)
        assert kept == real and kept["carol"] == 4 and kept["dave"] == 2
        carol = await ChunkRepository(db).begin_search("carol", session_id=None)
        assert carol.chunks == 4 and carol.version is not None
        assert await SessionRepository(db).delete(doomed.id, Viewer(user_id="carol", modifies=True))
        await db.execute(text("DELETE FROM navi_users WHERE id = 'dave'"))  # cascades
        kept, real = await counts(db)
        assert kept == real and kept["carol"] == 3 and "dave" not in kept
        after = await ChunkRepository(db).begin_search("carol", session_id=None)
        assert after.version is not None and after.version[0] == carol.version[0]  # same db
        assert after.version[1] > carol.version[1]  # a delete changed it
        await _store(db, "carol", ["User: seven"])
        again = await ChunkRepository(db).begin_search("carol", session_id=None)
        assert again.chunks == 4 and again.version is not None
        assert again.version[1] > after.version[1]  # and an insert
        assert (await ChunkRepository(db).begin_search("dave", session_id=None)).chunks == 0


async def test_candidates_are_the_users_and_plans_stay_custom(engine) -> None:  # type: ignore[no-untyped-def]
    """`load_candidates` returns only the user's chunks, each with its own segments (found
    by the chunk's key alone), and `begin_search` turns generic plans off for the
    transaction: psycopg prepares a statement run five times on one connection, and a
    plan made for any user read the heaviest user's whole segment range per chunk."""
    async with transaction(session_factory(engine)) as db:
        for uid in ("erin", "frank"):
            await db.execute(text("INSERT INTO navi_users (id, name) VALUES (:u, :u)"), {"u": uid})
        repo, writer = ChunkRepository(db), ChunkWriter(db)
        dim = await _segment_dim(db)
        vec = [1.0] + [0.0] * (dim - 1)
        far = [0.0, 1.0] + [0.0] * (dim - 2)
        sid = uuid.uuid4()
        mine = _chunk("User: erin's chunk\nAssistant: two lines", 0)
        theirs = _chunk("User: frank's chunk", 1)
        await writer.add_chunks("erin", sid, [mine], [[(0, 18, vec), (19, 39, far)]])
        await writer.add_chunks("frank", uuid.uuid4(), [theirs], [[(0, 19, vec)]])
        ids = {
            c: i for c, i in (await db.execute(text("SELECT content, id FROM memory_chunks"))).all()
        }
        assert (await repo.begin_search("erin", session_id=None)).chunks == 1
        # read where erin's rows are read (on a cluster: her shard's connection)
        settings = (
            await db.execute(
                text(
                    "SELECT current_setting('plan_cache_mode'), current_setting('jit'),"
                    " current_setting('max_parallel_workers_per_gather')"
                    " FROM memory_chunk_counts WHERE user_id = 'erin'"
                )
            )
        ).one()
        assert tuple(settings) == ("force_custom_plan", "off", "0")
        for _ in range(7):  # past psycopg's prepare threshold: the same answer
            got = await repo.load_candidates("erin", list(ids.values()), vec)
            assert [r.content for r, _ in got] == [mine.content]
            assert sorted((s.start, s.end, round(s.similarity, 3)) for s in got[0][1]) == [
                (0, 18, 1.0),
                (19, 39, 0.0),
            ]
        # frank's own chunk, asked for by erin, is not returned
        assert await repo.load_candidates("erin", [ids[theirs.content]], vec) == []
    # outside the search's transaction the server's defaults are back
    async with transaction(session_factory(engine)) as db:
        mode = (await db.execute(text("SELECT current_setting('plan_cache_mode')"))).scalar_one()
        assert mode == "auto"


async def test_a_graph_walk_on_its_own_connection_sets_its_scan(engine) -> None:  # type: ignore[no-untyped-def]
    """The segment walk may run first on a side connection (no `begin_search` there): the
    one statement turns the iterative scan on for its own transaction, before the walk
    (read where the user's vectors are: on a cluster the user's shard's connection)."""
    setting = (
        "SELECT current_setting('hnsw.iterative_scan'), count(*) FROM memory_chunk_vectors"
        " WHERE user_id = 'nobody'"
    )
    async with transaction(session_factory(engine)) as db:
        dim = await _segment_dim(db)
        repo = ChunkRepository(db)
        assert await repo.nearest_segments("nobody", [1.0] * dim, session_id=None, limit=5) == []
        got = (await db.execute(text(setting))).one()
        assert tuple(got) == ("relaxed_order", 0)
    async with transaction(session_factory(engine)) as db:
        scan = (await db.execute(text(setting))).one()
        assert tuple(scan) == ("off", 0)


async def test_search_statements_are_never_prepared(engine) -> None:  # type: ignore[no-untyped-def]
    """psycopg prepares a statement run five times on one connection, and PostgreSQL may
    then plan it once for every user: the raw search's statements are sent unprepared,
    however often they run."""
    async with transaction(session_factory(engine)) as db:
        await db.execute(text("INSERT INTO navi_users (id, name) VALUES ('gina', 'gina')"))
        [cid] = await _store(db, "gina", ["User: gina's katori chunk"])
        dim = await _segment_dim(db)
        repo = ChunkRepository(db)
        vec = [1.0] + [0.0] * (dim - 1)
        for _ in range(7):
            assert (await repo.begin_search("gina", session_id=None)).chunks == 1
            assert await repo.term_matches("gina", ["kato"], session_id=None, cap=5) == [[cid]]
            for exact in (True, False):
                await repo.nearest_segments("gina", vec, session_id=None, limit=5, exact=exact)
            got = await repo.load_candidates("gina", [uuid.UUID(cid)], vec)
            assert [r.content for r, _ in got] == ["User: gina's katori chunk"]
        prepared = (
            await db.execute(
                text(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement ILIKE"
                    " '%memory_chunk%' OR statement ILIKE '%set_config%'"
                )
            )
        ).scalar_one()
        assert prepared == 0


async def test_the_walk_scans_on_past_other_users_vectors(engine) -> None:  # type: ignore[no-untyped-def]
    """The iterative scan is on while the graph is walked (set in the walk's own
    statement): where the first `ef_search` (40) vectors found are all another user's,
    the walk goes on to the user's own; the same walk with the scan off finds nothing."""
    near_user = "ivan"
    async with transaction(session_factory(engine)) as db:
        cluster = await _on_cluster(db)
        if cluster:  # a user of ivan's shard: its graph holds both
            shard = (
                "SELECT get_shard_id_for_distribution_column('memory_chunk_vectors',"
                " CAST(:u AS text))"
            )
            mine = (await db.execute(text(shard), {"u": near_user})).scalar_one()
            n = 0
            while (await db.execute(text(shard), {"u": f"other-{n}"})).scalar_one() != mine:
                n += 1
            other = f"other-{n}"
        else:  # a user of ivan's bucket
            other = next(
                f"other-{n}"
                for n in range(10_000)
                if user_bucket(f"other-{n}") == user_bucket(near_user)
            )
        for uid in (near_user, other):
            await db.execute(text("INSERT INTO navi_users (id, name) VALUES (:u, :u)"), {"u": uid})
        dim = await _segment_dim(db)
        repo, writer = ChunkRepository(db), ChunkWriter(db)
        query = [1.0] + [0.0] * (dim - 1)
        sid = uuid.uuid4()
        for n in range(120):  # the other user's vectors, all nearer the query than ivan's
            close = [1.0, 0.001 * n] + [0.0] * (dim - 2)
            await writer.add_chunks(other, sid, [_chunk(f"User: other {n}", n)], [[(0, 5, close)]])
        far = [0.2, 1.0] + [0.0] * (dim - 2)
        await writer.add_chunks(near_user, sid, [_chunk("User: ivan's", 0)], [[(0, 5, far)]])
        await db.execute(text("SET LOCAL enable_seqscan = off"))
        await db.execute(text("DROP INDEX ix_memory_chunk_vectors_user_session"))  # the graph only
        got = await repo.nearest_segments(near_user, query, session_id=None, limit=5)
        assert len(got) == 1
        bucket = "" if cluster else f" AND navi_user_bucket(user_id) = {user_bucket(near_user)}"
        await db.execute(text("SET LOCAL hnsw.iterative_scan = off"))
        v = "[" + ",".join(map(str, query)) + "]"
        without = await db.execute(
            text(
                "SELECT chunk_id FROM memory_chunk_vectors WHERE user_id = :u"
                f"{bucket} ORDER BY embedding <=> '{v}' LIMIT 5"
            ),
            {"u": near_user},
        )
        assert without.all() == []


async def test_common_terms_are_remembered_while_the_users_chunks_stay(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A term found in `TERM_CAP` chunks or more (here 2) is looked up once while the
    user's chunks do not change; a chunk added changes their version and the term is
    looked up again; a search of one session's chunks does not use the memory."""
    import app.domain.raw_history.search as search_service

    monkeypatch.setattr(search_service, "_COMMON", CommonTerms(8))
    monkeypatch.setattr(search_service, "TERM_CAP", 2)
    async with transaction(session_factory(engine)) as db:
        await db.execute(text("INSERT INTO navi_users (id, name) VALUES ('hana', 'hana')"))
        await _store(db, "hana", ["User: katori one", "User: katori two", "User: rare zebra"])
        repo = ChunkRepository(db)
        calls: list[list[str]] = []
        real = repo.term_matches

        async def spy(user_id, terms, **kw):  # type: ignore[no-untyped-def]
            calls.append(list(terms))
            return await real(user_id, terms, **kw)

        repo.term_matches = spy  # type: ignore[method-assign]
        lookup = search_service.lookup_terms
        scope = await repo.begin_search("hana", session_id=None)
        first = await lookup(repo, "hana", ["kato", "zebra"], scope, None)
        second = await lookup(repo, "hana", ["kato", "zebra"], scope, None)
        assert [list(ids) for ids in first] == [list(ids) for ids in second]
        assert len(first[0]) == 2 and len(first[1]) == 1
        assert calls == [["kato", "zebra"], ["zebra"]]  # the common one from memory

        [new] = await _store(db, "hana", ["User: katori three"])
        scope = await repo.begin_search("hana", session_id=None)
        await lookup(repo, "hana", ["kato"], scope, None)
        assert calls[-1] == ["kato"]  # another version: looked up again
        await lookup(repo, "hana", ["kato"], scope, None)
        assert len(calls) == 3  # and remembered again

        sid = (
            await db.execute(text("SELECT session_id FROM memory_chunks WHERE id = :i"), {"i": new})
        ).scalar_one()
        one = await repo.begin_search("hana", session_id=sid)
        assert one.version is None
        assert [list(ids) for ids in await lookup(repo, "hana", ["kato"], one, sid)] == [[new]]
        assert len(calls) == 4  # one session's chunks: always looked up


async def test_a_repository_kept_across_commits_uses_the_sessions_connection(engine) -> None:  # type: ignore[no-untyped-def]
    """The driver connection is the session's current one, also after a commit (when the
    session may hold another pooled connection)."""
    async with session_factory(engine)() as db:
        repo = ChunkRepository(db)
        pids = []
        for _ in range(2):
            await repo.begin_search("nobody", session_id=None)
            pids.append((await db.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            got = await repo._rows("SELECT pg_backend_pid() AS pid", {})
            assert got[0].pid == pids[-1]
            await db.commit()
