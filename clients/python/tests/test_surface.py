"""The rest of the surface against the live service: every answer decodes into its
Struct, and the calls do what docs/api.md says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from navi_client import (
    Fact,
    Forbidden,
    Message,
    ModelUsage,
    Navi,
    NotFound,
    Page,
    SessionSummary,
    Unauthorized,
)

from conftest import Live


def test_health_me_and_tokens(live: Live, navi: Navi, user: tuple[str, str]) -> None:
    assert navi.health().database is True
    me = navi.me()
    assert me.id == user[0] and not me.is_admin
    issued = navi.create_token("laptop")
    assert issued.token and issued.user_id == me.id
    tokens = navi.list_tokens()
    assert {t.name for t in tokens.items} >= {"test", "laptop"}
    with Navi(live.base_url, issued.token) as laptop:
        assert laptop.me().id == me.id
        navi.revoke_token(issued.id)
        with pytest.raises(Unauthorized):
            laptop.me()


def test_admin_users(admin: Navi) -> None:
    user = admin.admin_create_user("someone", permissions=["navi.memory.read_all"])
    assert user.permissions == ["navi.memory.read_all"] and user.created_at
    page = admin.admin_list_users(limit=200)
    assert user.id in {u.id for u in page.items}
    token = admin.admin_issue_token(user.id, "ci")
    assert token.user_id == user.id
    forgotten = admin.admin_forget(user.id, "nothing-here", dry_run=True)
    assert forgotten.dry_run and forgotten.total == 0
    with admin.admin_export(user.id) as export:
        assert [r["type"] for r in export][0] == "header"
    admin.admin_delete_user(user.id)
    with pytest.raises(NotFound):
        admin.admin_issue_token(user.id)


def test_sessions(navi: Navi) -> None:
    ids = [navi.create_session(name=f"s{i}").id for i in range(3)]
    page = navi.list_sessions(limit=2, sort_by="name", sort_order="asc")
    assert isinstance(page, Page) and isinstance(page.items[0], SessionSummary)
    assert [s.name for s in page.items] == ["s0", "s1"]
    assert page.has_more and page.total == 3 and page.next_offset == 2
    rest = navi.list_sessions(limit=2, offset=page.next_offset, sort_by="name", sort_order="asc")
    assert [s.name for s in rest.items] == ["s2"] and rest.next_offset is None

    changed = navi.update_session(ids[0], name="renamed", pinned=True)
    assert (changed.name, changed.pinned) == ("renamed", True)
    assert navi.update_session(ids[0], pinned=False).name == "renamed"  # name untouched
    assert navi.update_session(ids[0], name=None).name is None  # cleared

    navi.append_messages(ids[1], [Message("user", "deploy to staging")])
    assert [s.id for s in navi.list_sessions(search="DEPLOY").items] == [ids[1]]  # messages
    matches = navi.session_matches("deploy", [ids[1], ids[2]])
    assert [m.session_id for m in matches.sessions] == [ids[1]]
    navi.delete_session(ids[2])
    assert navi.list_sessions().total == 2


def test_messages_context_and_compression(navi: Navi) -> None:
    sid = navi.create_session("small").id
    msgs = [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(6)]
    appended = navi.append_messages(sid, msgs, usage=ModelUsage("fake-chat", 120))
    assert [m.sequence_number for m in appended.messages] == list(
        range(appended.messages[0].sequence_number, appended.messages[0].sequence_number + 6)
    )
    newest = navi.list_messages(sid, limit=4)
    assert [m.content for m in newest.messages] == [f"message {i}" for i in range(2, 6)]
    assert newest.has_more and newest.next_before_seq is not None
    older = navi.list_messages(sid, before_seq=newest.next_before_seq, limit=4)
    assert [m.content for m in older.messages] == ["message 0", "message 1"]
    assert not older.has_more

    context = navi.get_context(sid)
    assert [m.content for m in context.messages][-1] == "message 5"
    prepared = navi.prepare(sid, "and now?")
    assert prepared.window == 4096 and prepared.tokens > 0
    assert [m.content for m in prepared.context][-1] == "message 5"
    assert navi.prepare(sid, mid_turn=True).session_id == sid

    navi.add_planning(sid, {"step": "plan", "n": 1})
    planning = navi.list_planning(sid)
    assert planning.total == 1 and planning.planning_logs[0]["step"] == "plan"

    reset = navi.reset_session(sid)
    assert reset.messages_cleared >= 6
    assert navi.list_messages(sid).messages == []


def test_facts_summary_and_forget(navi: Navi, admin: Navi, user: tuple[str, str]) -> None:
    saved = navi.save_fact("prefs", "editor", "neovim", source="user_explicit", confidence=90)
    assert isinstance(saved, Fact) and saved.merged == [] and saved.confidence == 90
    other = navi.save_fact("prefs", "shell", "fish")
    page = navi.list_facts(sort_by="key", sort_order="asc")
    assert [f.key for f in page.items] == ["editor", "shell"]
    found = navi.search_facts("neovim")
    assert found.items[0].key == "editor" and found.mode in ("vector", "text")
    cats = navi.list_categories()
    assert [(c.category, c.count) for c in cats.categories] == [("prefs", 2)]

    assert admin.admin_list_facts(user_id=user[0]).total == 2
    assert admin.admin_search_facts("neovim", user_id=user[0]).items[0].id == saved.id
    hidden = admin.admin_merge_fact(other.id, saved.id)
    assert hidden.merged_into == saved.id
    assert admin.admin_merge_fact(other.id, None).merged_into is None

    navi.save_fact("prefs", "editor", "helix")  # a new value: a new version
    history = navi.fact_history(saved.id, limit=1)
    assert [v.value for v in history.items] == ["helix"] and history.has_more
    older = navi.fact_history(saved.id, cursor=history.next_cursor).items
    assert [(v.value, v.current) for v in older] == [("neovim", False)]
    then = navi.list_facts(as_of=older[0].valid_from.isoformat())
    assert [f.value for f in then.items if f.key == "editor"] == ["neovim"]
    assert navi.restore_fact(saved.id, older[0].id).value == "neovim"
    assert len(navi.fact_history(saved.id).items) == 3

    navi.delete_fact("shell", category="prefs")
    with pytest.raises(NotFound):
        navi.delete_fact("shell", category="prefs")

    assert navi.get_memory_summary().content == ""
    assert navi.set_memory_summary("Likes neovim.").content == "Likes neovim."
    dry = navi.forget("neovim", dry_run=True)
    assert dry.dry_run and dry.changed["facts"] == 1 and dry.changed["memory_summary"] == 1
    done = navi.forget("neovim")
    assert done.total == dry.total and navi.list_facts().total == 0


def test_tools(navi: Navi) -> None:
    sid = navi.create_session().id
    saved = navi.memory_tool("save", category="infra", key="port", value="6543")
    assert saved.ok and saved.fact is not None and "6543" in saved.text
    searched = navi.memory_tool("search", query="port")
    assert searched.ok and searched.facts and searched.facts[0].key == "port"
    listed = navi.memory_tool("list")
    assert listed.categories and listed.categories[0].category == "infra"
    gone = navi.memory_tool("forget", key="port", category="infra")
    assert gone.deleted == 1

    navi.append_messages(
        sid, [Message("user", "the cat food arrives Friday"), Message("assistant", "ok")]
    )
    history = navi.chat_history(sid, "cat food")
    assert history.hits and "cat food" in history.hits[0].content and history.text
    recent = navi.chat_history(sid, mode="recent", limit=1)
    assert [h.content for h in recent.hits] == ["ok"]

    written = navi.write_error("shell", "Permission denied: /var/log/x", "chown it")
    assert written.created and written.entry.tool == "shell"
    errors = navi.error_history("permission denied")
    assert errors.hits[0].fix == "chown it"

    for _ in range(20):  # the live indexer makes the append findable moments later
        hits = navi.memory_search_tool("cat food", scope="raw", session_id=sid)
        if hits.hits:
            break
        time.sleep(0.25)
    assert hits.hits and hits.hits[0].source_type == "raw" and hits.text
    assert navi.search_memory("cat food", scope="raw", k=1).hits[0].session_id == sid

    raw = navi.call_tool("chat_history", {"query": "Friday"}, session_id=sid)
    assert raw["hits"] and "Friday" in raw["text"]


def test_scratchpad(navi: Navi) -> None:
    sid = navi.create_session().id
    written = navi.write_scratchpad(sid, "plan notes", "1. deploy")
    assert (written.section, written.value) == ("plan notes", "1. deploy")
    assert navi.read_scratchpad(sid, "plan notes").value == "1. deploy"
    assert [s.section for s in navi.list_scratchpad(sid).items] == ["plan notes"]
    navi.delete_scratchpad(sid, "plan notes")
    with pytest.raises(NotFound):
        navi.read_scratchpad(sid, "plan notes")


def test_files_and_shares(navi: Navi, tmp_path: Path) -> None:
    sid = navi.create_session().id
    local = tmp_path / "notes.md"
    local.write_text("# notes\n")
    uploaded = navi.upload_files(sid, [("report.txt", b"hello report"), str(local)])
    assert [f.name for f in uploaded.files] == ["report.txt", "notes.md"]
    assert "report.txt" in uploaded.message_block
    assert [f.name for f in navi.list_files(sid).items] == ["notes.md", "report.txt"]
    assert navi.download_file(sid, "report.txt") == b"hello report"
    card = navi.publish_file(sid, "report.txt")
    assert (card.name, card.size) == ("report.txt", 12)
    with pytest.raises(Forbidden):  # no SHARE_FILE_ROOTS on this service
        navi.share_file(sid, str(local))

    navi.append_messages(sid, [Message("user", "share me"), Message("assistant", "shared")])
    link = navi.share_session(sid)
    assert link.url.endswith(link.token)
    shared = navi.get_shared(link.token, limit=1)
    assert [m.content for m in shared.messages] == ["shared"] and shared.has_more
    older = navi.shared_messages(link.token, before_seq=shared.next_before_seq)
    assert [m.content for m in older.messages] == ["share me"]


def test_export_saved_to_a_file(navi: Navi, tmp_path: Path) -> None:
    sid = navi.create_session(name="exported").id
    navi.append_messages(sid, [Message("user", "hi")])
    target = tmp_path / "export.ndjson"
    written = navi.export_account().save(target)
    lines = target.read_bytes().splitlines()
    assert written == target.stat().st_size and len(lines) >= 4
    assert b'"type":"header"' in lines[0] and b'"type":"end"' in lines[-1]
