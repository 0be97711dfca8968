"""The token calibration is a user's own, and bounded (issue 42, review item 1).

The calibration was one line per model name per process, fitted on whatever `usage` any
client reported: one user's forged reports (a million prompt tokens for a thousand
characters, under the profile's model name) priced every other user's fresh session at a
million tokens, and their `prepare` answered 422. Now each user has their own line, fitted
on Navi's own count of the prompt's characters with counts no tokenizer could produce
left out, and its overhead is bounded by the window: a user's claims reach only their own
estimates, and not even those past `chars × 1 + window / 2`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import new_user

from .conftest import LIMIT, MODEL, PROFILES, WINDOW, append, new_session

WIDE = 65_536  # a profile of the same model with a large window (no compression below)
HELLO = {"role": "user", "content": "hello"}


@pytest.fixture
def profiles_file(tmp_path: Path) -> str:
    path = tmp_path / "profiles.json"
    wide = {"context_window": WIDE, "compression_keep_recent": 4, "model": MODEL}
    path.write_text(json.dumps({**PROFILES, "wide": wide}))
    return str(path)


def _forged(i: int) -> dict[str, Any]:
    """The review's probe: about a million prompt tokens for 1,000 / 2,000 characters."""
    count, chars = ((1_000_300, 1000), (1_000_600, 2000))[i % 2]
    return {"model": MODEL, "prompt_eval_count": count, "sent_chars": chars, "had_images": False}


async def _forge_a_million(client: AsyncTestClient, headers: dict[str, str]) -> str:
    sid = await new_session(client, headers=headers)
    for i in range(8):
        exchange = [{"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": "ok"}]
        await append(client, sid, exchange, usage=_forged(i), headers=headers)
    return sid


async def _prepare(client: AsyncTestClient, sid: str, headers: dict[str, str]) -> dict[str, Any]:
    r = await client.post(f"/sessions/{sid}/prepare", json={"message": HELLO}, headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_one_users_forged_usage_leaves_another_users_context_alone(
    cclient: AsyncTestClient,
) -> None:
    """The review's black-box probe: B's fresh session still prepares after A's reports."""
    _, alice = await new_user(cclient, "alice")
    _, bob = await new_user(cclient, "bob")
    before = await new_session(cclient, headers=bob)
    assert (await _prepare(cclient, before, bob))["tokens"] < 100
    await _forge_a_million(cclient, alice)
    fresh = await new_session(cclient, headers=bob)
    for sid in (fresh, before):
        out = await _prepare(cclient, sid, bob)
        assert out["tokens"] < 100 and out["events"] == []


async def test_a_users_own_claims_cannot_push_their_estimates_past_the_bound(
    cclient: AsyncTestClient,
) -> None:
    _, alice = await new_user(cclient, "alice")
    # 1. counts no tokenizer could produce for the prompt are neither fitted nor kept as
    # the session's baseline: the session the reports were made on still prepares
    forged = await _forge_a_million(cclient, alice)
    meta = (await cclient.get(f"/sessions/{forged}", headers=alice)).json()["session_metadata"]
    assert "baseline" not in meta
    assert (await _prepare(cclient, forged, alice))["tokens"] < 200

    # 2. plausible counts (under 4 tokens a character) that fit a line with a huge
    # overhead: 30,000 tokens + 0.5 a character, on a session of a 64k-window profile
    wide = await new_session(cclient, "wide", headers=alice)
    sent: list[dict[str, str]] = []
    for i in range(8):
        user = {"role": "user", "content": f"question {i} " + "x" * 500}
        sent.append(user)
        chars = sum(len(m["role"]) + len(m["content"]) for m in sent)
        usage = {"model": MODEL, "prompt_eval_count": 30_000 + math.ceil(chars / 2)}
        reply = {"role": "assistant", "content": f"answer {i} " + "y" * 500}
        res = await append(cclient, wide, [user, reply], usage=usage, headers=alice)
        assert res["events"] == []
        sent.append(reply)
    meta = (await cclient.get(f"/sessions/{wide}", headers=alice)).json()["session_metadata"]
    assert meta["baseline"]["tokens"] > 30_000  # a real count of that session: kept

    # A fresh session of the 4k-window profile is priced by that line, its overhead held
    # to half of this window: "hello" costs at most 2,048 + its 9 characters, and fits.
    fresh = await new_session(cclient, headers=alice)
    out = await _prepare(cclient, fresh, alice)
    assert WINDOW // 4 < out["tokens"] <= WINDOW // 2 + len("user") + len("hello")
    assert out["tokens"] <= LIMIT and out["events"] == []
    assert (await _prepare(cclient, forged, alice))["tokens"] <= LIMIT
