"""Context modes compared on LoCoMo conversations: `compress` vs `rolling` (issue 8 F).

    make bench-context-modes                 # embedded PostgreSQL in bench/.cache/pg
    .venv/bin/python bench/bench_context_modes.py --conversations 2

Data: the LoCoMo dev split (shared/bench/locomo/locomo_dev.json) — conversations 0–4 of
LoCoMo, "Evaluating Very Long-Term Conversational Memory of LLM Agents" (ACL 2024),
snap-research/LoCoMo, data/locomo10.json, CC BY-NC 4.0. Used for benchmarking only.

Each conversation is replayed through the real app (create_app, HTTP in-process, real
PostgreSQL) once per mode: a run of `speaker_a` turns is one user message, a run of
`speaker_b` turns one assistant reply. Per user message (a "turn") the agent calls
`POST /sessions/{id}/prepare` with the incoming message, sends the returned context to
its model (not simulated: only its size is counted), then appends the user message and
the reply. In rolling mode the rolling-summary job runs once after each LoCoMo session
(a sitting of a few minutes; the job runs every 15 minutes, so about once per sitting).

The LLM is the fake Ollama server of tests/fakes (no model is run): it counts the calls
Navi makes and answers with summaries of a fixed size model — compress: ~15 % of the
summarised text, at most 4,000 chars; rolling: a JSON summary keeping the 12 newest
past discussions. Sizes are counted as characters / 4 ("≈ tokens") for every prompt,
the agent's and Navi's own, so the two modes are compared in one unit.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import sys
import time
from typing import Any

from _agent import QUIET, app_files, in_process_api, prepare
from _app import FakeOllama, ScriptedReply, Settings, run_rolling_summaries
from _common import Stats, print_table, provision, write_results
from locomo_data import Conversation, Message, load
from locomo_data import messages_of as locomo_messages

WINDOW = 8192
MODES = ("compress", "rolling")
CHARS_PER_TOKEN = 4


def tokens(chars: int) -> float:
    return chars / CHARS_PER_TOKEN


# ------------------------------------------------------------------ the fake model
def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def compress_reply(body: dict[str, Any]) -> str:
    """Bullets of the first words of each transcript line: ~15 % of the input, ≤ 4,000."""
    user = body["messages"][-1]["content"]
    budget = min(int(len(user) * 0.15), 4000)
    bullets, size = [], 0
    for line in _lines(user):
        words = line.split()[:12]
        bullet = "- " + " ".join(words)
        if size + len(bullet) > budget:
            break
        bullets.append(bullet)
        size += len(bullet) + 1
    return "\n".join(bullets or ["- (nothing)"]) + "\nKEYS: NONE"


def rolling_reply(body: dict[str, Any]) -> str:
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    prev = json.loads(system.split("Previous summary:\n", 1)[1].split("\n\nAnswer with", 1)[0])
    words = re.sub(r"\[[^\]]*\]", " ", user).split()
    past = [*prev.get("past_discussions", []), " ".join(words[2:22])][-12:]
    return json.dumps(
        {
            "key_decisions": ["Do: keep answers short", "Don't: share personal data"],
            "past_discussions": past,
            "current_discussion": " ".join(words[-30:]),
        }
    )


class BenchOllama(FakeOllama):
    """The fake server with one responder for every chat request, by prompt kind."""

    def _next_reply(self, body: dict[str, Any]) -> ScriptedReply:
        system = str((body.get("messages") or [{}])[0].get("content", ""))
        rolling = "running summary" in system
        return ScriptedReply(rolling_reply(body) if rolling else compress_reply(body))


def chat_chars(fake: FakeOllama, start: int) -> tuple[int, int]:
    """(calls, prompt chars) of the chat requests since the `start`-th."""
    bodies = fake.requests_for("/api/chat")[start:]
    prompt = sum(
        len(str(m.get("content") or "")) for body in bodies for m in body.get("messages") or []
    )
    return len(bodies), prompt


# ------------------------------------------------------------------ replay
def messages_of(conv: Conversation) -> list[Message]:
    """Runs of one speaker merged: speaker A = user, speaker B = assistant."""
    out: list[Message] = []
    for m in locomo_messages(conv):
        if out and out[-1].role == m.role and out[-1].session_no == m.session_no:
            out[-1].content += "\n" + m.content
        else:
            out.append(m)
    return out


@dataclasses.dataclass
class ModeResult:
    mode: str
    turns: int = 0
    main_prompt: list[float] = dataclasses.field(default_factory=list)  # ≈ tokens per turn
    context_messages: list[int] = dataclasses.field(default_factory=list)
    navi_estimate: list[int] = dataclasses.field(default_factory=list)  # prepare's `tokens`
    navi_calls: int = 0
    navi_prompt_chars: int = 0
    embeds: int = 0
    forced: int = 0  # prepare answered context_too_large: /compact, then again
    seconds: float = 0.0


async def replay(
    client: Any, fake: FakeOllama, conv: Conversation, mode: str, result: ModeResult
) -> None:
    r = await client.post(
        "/sessions", json={"profile_id": f"bench-{mode}", "name": f"{conv.sample_id}"}
    )
    sid = r.json()["id"]
    msgs = messages_of(conv)
    chat_start = fake.count("/api/chat")
    embed_start = fake.count("/api/embed")
    started = time.perf_counter()
    i = 0
    while i < len(msgs):
        m = msgs[i]
        batch = [m]
        if m.role == "user":
            r, forced = await prepare(client, sid, {"message": {"content": m.content}})
            result.forced += forced
            if r.status_code != 200:
                raise RuntimeError(f"{mode} prepare: {r.status_code} {r.text[:300]}")
            ctx = r.json()["context"]
            result.navi_estimate.append(int(r.json()["tokens"]))
            chars = sum(len(c["content"]) for c in ctx) + len(m.content)
            result.main_prompt.append(tokens(chars))
            result.context_messages.append(len(ctx))
            result.turns += 1
            if i + 1 < len(msgs) and msgs[i + 1].role == "assistant":
                batch.append(msgs[i + 1])
        payload = [
            {"role": b.role, "content": b.content, "created_at": b.created_at.isoformat() + "Z"}
            for b in batch
        ]
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": payload})
        if r.status_code != 201:
            raise RuntimeError(f"append: {r.status_code} {r.text[:300]}")
        i += len(batch)
        session_ends = i >= len(msgs) or msgs[i].session_no != batch[-1].session_no
        if mode == "rolling" and session_ends:
            await run_rolling_summaries(client.app.state.runtime)
    result.seconds += time.perf_counter() - started
    calls, prompt_chars = chat_chars(fake, chat_start)
    result.navi_calls += calls
    result.navi_prompt_chars += prompt_chars
    result.embeds += fake.count("/api/embed") - embed_start


def _row(r: ModeResult) -> list[object]:
    main = Stats.of(r.main_prompt)
    navi_per_turn = tokens(r.navi_prompt_chars) / max(r.turns, 1)
    return [
        r.mode,
        r.turns,
        r.navi_calls,
        f"{100 * r.navi_calls / max(r.turns, 1):.2f}",
        f"{main.mean:,.0f}",
        f"{main.p95:,.0f}",
        f"{main.max:,.0f}",
        f"{navi_per_turn:,.0f}",
        f"{main.mean + navi_per_turn:,.0f}",
        f"{Stats.of(r.navi_estimate).mean:,.0f}",
        f"{sum(r.context_messages) / max(len(r.context_messages), 1):.1f}",
        r.embeds,
        r.forced,
    ]


async def run(conversations: list[Conversation], settings: Settings) -> dict[str, ModeResult]:
    target = provision("navi_bench_context_modes")
    results = {m: ModeResult(m) for m in MODES}
    async with in_process_api(
        target,
        lambda url: dataclasses.replace(settings, ollama_host=url),
        BenchOllama(dim=settings.vector_dim),
        token=None,
    ) as api:
        for conv in conversations:
            for mode in MODES:
                await replay(api.client, api.fake, conv, mode, results[mode])
                print(f"  {conv.sample_id} {mode}: done", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=5, help="how many (1-5)")
    args = parser.parse_args(argv)
    conversations = load()[: args.conversations]
    profiles = {
        "bench-compress": {"context_window": WINDOW},
        "bench-rolling": {"context_window": WINDOW, "context_mode": "rolling"},
    }
    settings = Settings(
        auth_enabled=False,
        ollama_timeout=10.0,
        **app_files(profiles, prefix="navi-bench-modes-"),
        **QUIET,
    )
    results = asyncio.run(run(conversations, settings))
    headers = [
        "mode",
        "turns",
        "Navi LLM calls",
        "per 100 turns",
        "agent prompt ≈tok mean",
        "p95",
        "max",
        "Navi prompt ≈tok/turn",
        "total ≈tok/turn",
        "prepare tokens mean",
        "ctx msgs mean",
        "embed reqs",
        "422→compact",
    ]
    title = (
        f"context modes on LoCoMo dev ({len(conversations)} conversations, "
        f"{sum(len(c.turns) for c in conversations):,} LoCoMo turns), window {WINDOW:,} tokens"
    )
    print_table(headers, [_row(results[m]) for m in MODES], title=title)
    print()
    write_results(
        "context-modes.json",
        {
            m: {
                "turns": r.turns,
                "navi_calls": r.navi_calls,
                "navi_prompt_chars": r.navi_prompt_chars,
                "agent_prompt_tokens": dataclasses.asdict(Stats.of(r.main_prompt)),
                "prepare_tokens": dataclasses.asdict(Stats.of(r.navi_estimate)),
                "context_messages_mean": sum(r.context_messages) / max(len(r.context_messages), 1),
                "embeds": r.embeds,
                "forced_compactions": r.forced,
                "seconds": r.seconds,
            }
            for m, r in results.items()
        },
        label="figures also in",
    )
    print("(LoCoMo data CC BY-NC 4.0)")


if __name__ == "__main__":
    main()
