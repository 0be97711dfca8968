"""The framework adapters with the frameworks' real packages, against the live service:
an OpenAI Agents SDK `Session` and a LangGraph `BaseStore` (no model call needed)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langgraph")

from agents.memory.session import SessionABC  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402

from navi_client import AsyncNavi, Navi  # noqa: E402
from navi_client.integrations.langgraph import NaviStore  # noqa: E402
from navi_client.integrations.openai_agents import NaviSession  # noqa: E402

from conftest import Live  # noqa: E402

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Deploy the billing service to staging, please."},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "deploy",
        "arguments": '{"service": "billing", "env": "staging"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "deployed v42"},
    {
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": "Billing v42 is on staging.", "annotations": []}
        ],
    },
]


async def test_agents_session_round_trip(live: Live, user: tuple[str, str], navi: Navi) -> None:
    async with AsyncNavi(live.base_url, user[1]) as client:
        session = await NaviSession.open(client, name="agents sdk")
        assert isinstance(session, SessionABC)
        assert await session.get_items() == []
        await session.add_items(ITEMS)
        assert await session.get_items() == ITEMS  # exactly what was added
        assert await session.get_items(limit=2) == ITEMS[-2:]
        # Navi's own view: the messages and their roles, findable by memory search
        page = navi.list_messages(session.session_id)
        assert [m.role for m in page.messages] == ["user", "assistant", "tool", "assistant"]
        assert page.messages[1].tool_calls and page.messages[2].tool_call_id == "call_1"

        assert await session.pop_item() == ITEMS[-1]
        assert await session.get_items() == ITEMS[:-1]
        assert await session.pop_item() == ITEMS[-2]
        await session.add_items([{"role": "user", "content": "And production?"}])
        items = await session.get_items()
        assert items == [*ITEMS[:2], {"role": "user", "content": "And production?"}]

        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None


async def test_agents_session_system_items_reach_the_model(
    live: Live, user: tuple[str, str]
) -> None:
    async with AsyncNavi(live.base_url, user[1]) as client:
        session = await NaviSession.open(client)
        note = {"role": "developer", "content": "Answer in French."}
        await session.add_items([note, {"role": "user", "content": "Bonjour"}])
        assert await session.get_items() == [note, {"role": "user", "content": "Bonjour"}]


def test_langgraph_store_sync(navi: Navi) -> None:
    store = NaviStore(navi)
    assert isinstance(store, BaseStore)
    ns = ("users", "u1", "prefs")
    store.put(ns, "editor", {"name": "neovim", "since": 2019})
    store.put(ns, "shell", {"name": "zsh"})
    store.put(("users", "u1", "projects"), "navi", {"role": "maintainer"})
    store.put(("users", "u2", "prefs"), "editor", {"name": "emacs"})

    got = store.get(ns, "editor")
    assert got is not None and got.value == {"name": "neovim", "since": 2019}
    assert got.namespace == ns and got.key == "editor"
    assert store.get(ns, "missing") is None

    listed = store.search(("users", "u1"))
    assert {(i.namespace, i.key) for i in listed} == {
        (ns, "editor"),
        (ns, "shell"),
        (("users", "u1", "projects"), "navi"),
    }
    assert [i.key for i in store.search(ns, filter={"name": "zsh"})] == ["shell"]
    assert len(store.search(("users",), limit=2)) == 2

    found = store.search(("users", "u1"), query="which editor does the user prefer? neovim")
    assert found and found[0].key == "editor" and found[0].namespace == ns
    assert all(i.namespace[:2] == ("users", "u1") for i in found)  # u2's emacs is not

    spaces = store.list_namespaces(prefix=("users",))
    assert spaces == [
        ("users", "u1", "prefs"),
        ("users", "u1", "projects"),
        ("users", "u2", "prefs"),
    ]
    assert store.list_namespaces(prefix=("users",), max_depth=2) == [
        ("users", "u1"),
        ("users", "u2"),
    ]
    assert store.list_namespaces(suffix=("prefs",)) == [
        ("users", "u1", "prefs"),
        ("users", "u2", "prefs"),
    ]

    store.put(ns, "shell", {"name": "fish"})  # replaces
    assert store.get(ns, "shell").value == {"name": "fish"}  # type: ignore[union-attr]
    store.delete(ns, "shell")
    assert store.get(ns, "shell") is None
    store.delete(ns, "shell")  # deleting what is gone is no error


async def test_langgraph_store_async(live: Live, user: tuple[str, str]) -> None:
    async with AsyncNavi(live.base_url, user[1]) as client:
        store = NaviStore(aclient=client)
        ns = ("agent", "notes")
        await store.aput(ns, "k1", {"text": "the deploy window is Tuesday"})
        item = await store.aget(ns, "k1")
        assert item is not None and item.value == {"text": "the deploy window is Tuesday"}
        hits = await store.asearch(("agent",), query="when is the deploy window?")
        assert [h.key for h in hits] == ["k1"]
        assert await store.alist_namespaces() == [ns]
        await store.adelete(ns, "k1")
        assert await store.aget(ns, "k1") is None


async def test_agents_session_history_compressed_by_navi(
    live: Live, user: tuple[str, str], ollama: Any
) -> None:
    """Compressed, the items the agent gets back start with Navi's summary, then the
    recent items as they were added; nothing older is sent again."""
    ollama.chat_replies.append("SUMMARY: the user deploys billing to staging.")
    async with AsyncNavi(live.base_url, user[1]) as client:
        session = await NaviSession.open(client, profile_id="small")
        turns = [
            item
            for n in range(6)
            for item in (
                {"role": "user", "content": f"step {n}: deploy billing part {n}"},
                {"role": "assistant", "content": f"done with part {n}"},
            )
        ]
        await session.add_items(turns)
        await client.compact(session.session_id)
        items = await session.get_items()
        assert "SUMMARY" in items[0]["content"]  # Navi's summary leads
        assert items[1:5] == turns[-4:]  # the recent part, exactly as added
        assert turns[0] not in items  # the compressed part is not sent again
        # what follows are notes Navi adds to the prompt (here: excerpts it recalled)
        assert all(i["role"] == "system" for i in items[5:])
