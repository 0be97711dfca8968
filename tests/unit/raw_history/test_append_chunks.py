"""`append_chunks`: a session's messages appended as they come, in any groups, give the
chunks one `build_chunks` over all of them gives."""

from __future__ import annotations

import random

from app.domain.raw_history.chunks import (
    CHUNK_MAX_CHARS,
    ChunkMessage,
    RawChunk,
    append_chunks,
    build_chunks,
)


def _messages(rng: random.Random, n: int) -> list[ChunkMessage]:
    out = []
    for seq in range(n):
        size = rng.choice([5, 40, 300, 1500, 3900, 4200, 9000])
        role = rng.choice(["user", "assistant", "tool", "system"])
        text = " ".join(f"w{seq}x{j}" for j in range(size // 6)) if rng.random() > 0.05 else ""
        out.append(ChunkMessage(role=role, content=text, sequence_number=seq, name="grep"))
    return out


def _append_in_groups(messages: list[ChunkMessage], rng: random.Random) -> list[RawChunk]:
    chunks: list[RawChunk] = []
    open_ = False
    i = 0
    while i < len(messages):
        step = rng.randint(1, 5)
        tail = chunks[-1] if chunks and open_ else None
        updated, new, still_open = append_chunks(tail, messages[i : i + step])
        if updated is not None:
            chunks[-1] = updated
        chunks += new
        open_ = bool(chunks) and (still_open if new else open_)
        i += step
    return chunks


def test_appending_in_any_groups_gives_the_chunks_of_one_build() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        messages = _messages(rng, rng.randint(1, 40))
        whole = build_chunks(messages)
        grown = _append_in_groups(messages, rng)
        key = [(c.content_hash, c.start_seq, c.end_seq) for c in whole]
        assert [(c.content_hash, c.start_seq, c.end_seq) for c in grown] == key, seed
        assert all(len(c.content) <= CHUNK_MAX_CHARS for c in grown)


def test_a_split_message_closes_the_chunk_and_breadcrumbs_merge() -> None:
    big = ChunkMessage(role="user", content="x " * 5000, sequence_number=0)
    _, pieces, still_open = append_chunks(None, [big])
    assert len(pieces) > 1 and not still_open
    first = ChunkMessage(role="user", content="port 8080 in server_port", sequence_number=1)
    _, [chunk], still_open = append_chunks(
        None, [first], lambda kept, texts: [*kept, "server_port"]
    )
    assert still_open and chunk.breadcrumbs == ("server_port",)
    more = ChunkMessage(role="assistant", content="set api_key too", sequence_number=2)
    updated, new, _ = append_chunks(chunk, [more], lambda kept, texts: [*kept, "api_key"])
    assert new == [] and updated is not None
    assert updated.breadcrumbs == ("server_port", "api_key")
    assert (updated.start_seq, updated.end_seq) == (1, 2)
    assert updated.content == chunk.content + "\n\nAssistant: set api_key too"
