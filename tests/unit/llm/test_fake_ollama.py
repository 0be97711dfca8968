"""The fake Ollama server itself (sync tests, plain httpx)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.ollama_server import DEFAULT_CHAT_REPLY, FakeOllama, cosine, fake_embedding

from .conftest import DIM


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5.0) as client:
        yield client


def test_version_and_tags(http: httpx.Client, fake: FakeOllama) -> None:
    assert http.get(f"{fake.url}/api/version").json() == {"version": "0.0.0-fake"}
    names = [m["name"] for m in http.get(f"{fake.url}/api/tags").json()["models"]]
    assert names == fake.models
    assert fake.count("/api/version") == 1
    assert fake.requests[0] == ("/api/version", None)


def test_embed_shapes_and_determinism(http: httpx.Client, fake: FakeOllama) -> None:
    r = http.post(f"{fake.url}/api/embed", json={"model": "m", "input": ["a b", "c"]}).json()
    assert r["model"] == "m"
    assert len(r["embeddings"]) == 2 and all(len(v) == DIM for v in r["embeddings"])
    assert r["prompt_eval_count"] == 3
    single = http.post(f"{fake.url}/api/embed", json={"model": "m", "input": "a b"}).json()
    assert single["embeddings"] == [r["embeddings"][0]]
    assert fake.requests_for("/api/embed")[1] == {"model": "m", "input": "a b"}


def test_fake_embedding_properties() -> None:
    v = fake_embedding("The quick brown fox", 768)
    assert len(v) == 768
    assert abs(sum(x * x for x in v) - 1.0) < 1e-9
    assert v == fake_embedding("the QUICK brown fox!", 768)  # case/punctuation-insensitive
    assert fake_embedding("", 16) == fake_embedding("  ...  ", 16) == [1.0] + [0.0] * 15
    base = fake_embedding("postgres vector index tuning", 256)
    near = fake_embedding("tuning the postgres vector index", 256)
    far = fake_embedding("banana bread recipe with walnuts", 256)
    assert cosine(base, near) > cosine(base, far) + 0.3
    # unicode words and trigram features: inflections stay close
    assert cosine(fake_embedding("café crème", 256), fake_embedding("café", 256)) > 0.3
    assert cosine(fake_embedding("embedding", 256), fake_embedding("embeddings", 256)) > 0.2
    assert abs(cosine(fake_embedding("embedding", 256), fake_embedding("walrus", 256))) < 0.2


def test_embed_dimensions_param_truncates(http: httpx.Client, fake: FakeOllama) -> None:
    body = {"model": "m", "input": "hello", "dimensions": 8}
    vec = http.post(f"{fake.url}/api/embed", json=body).json()["embeddings"][0]
    assert len(vec) == 8


def test_chat_scripted_callable_and_default(http: httpx.Client, fake: FakeOllama) -> None:
    fake.chat_replies = ["first", lambda req: "echo: " + req["messages"][-1]["content"]]
    body = {"model": "c", "messages": [{"role": "user", "content": "hi there"}], "stream": False}
    r1 = http.post(f"{fake.url}/api/chat", json=body).json()
    assert r1["message"] == {"role": "assistant", "content": "first"}
    assert r1["done"] is True and r1["done_reason"] == "stop"
    assert r1["prompt_eval_count"] == 2 and r1["eval_count"] == 1
    r2 = http.post(f"{fake.url}/api/chat", json=body).json()
    assert r2["message"]["content"] == "echo: hi there"
    r3 = http.post(f"{fake.url}/api/chat", json=body).json()
    assert r3["message"]["content"] == DEFAULT_CHAT_REPLY
    assert DEFAULT_CHAT_REPLY.endswith("KEYS: NONE")


def test_chat_streaming_ndjson(http: httpx.Client, fake: FakeOllama) -> None:
    fake.chat_replies = ["one two three"]
    body = {"model": "c", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with http.stream("POST", f"{fake.url}/api/chat", json=body) as r:
        assert r.headers["content-type"] == "application/x-ndjson"
        chunks = [json.loads(line) for line in r.iter_lines() if line]
    assert "".join(c["message"]["content"] for c in chunks) == "one two three"
    assert [c["done"] for c in chunks] == [False, False, False, True]
    assert chunks[-1]["eval_count"] == 3


@pytest.mark.parametrize(("mode", "status"), [("http500", 500), ("http404", 404), ("http400", 400)])
def test_error_modes_for_next_n_requests(
    http: httpx.Client, fake: FakeOllama, mode: str, status: int
) -> None:
    fake.fail(mode, times=2)
    url = f"{fake.url}/api/embed"
    codes = [http.post(url, json={"model": "x", "input": "a"}).status_code for _ in range(3)]
    assert codes == [status, status, 200]
    assert fake.count("/api/embed") == 3
    assert fake.mode is None


def test_http404_message_mentions_model(http: httpx.Client, fake: FakeOllama) -> None:
    fake.fail("http404")
    r = http.post(f"{fake.url}/api/chat", json={"model": "nope", "messages": []})
    assert r.json() == {"error": "model 'nope' not found"}


def test_malformed_and_wrong_dim(http: httpx.Client, fake: FakeOllama) -> None:
    fake.fail("malformed", times=1)
    r = http.post(f"{fake.url}/api/embed", json={"model": "x", "input": "a"})
    assert r.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        r.json()
    fake.fail("wrong_dim")
    assert http.get(f"{fake.url}/api/version").status_code == 200  # other paths unaffected
    vec = http.post(f"{fake.url}/api/embed", json={"model": "x", "input": "a"}).json()
    assert len(vec["embeddings"][0]) == fake.wrong_dim != DIM


def test_paths_filter(http: httpx.Client, fake: FakeOllama) -> None:
    fake.fail("http500", paths={"/api/chat"})
    assert http.get(f"{fake.url}/api/version").status_code == 200
    assert http.post(f"{fake.url}/api/chat", json={"model": "c"}).status_code == 500


def test_slow_mode(http: httpx.Client, fake: FakeOllama) -> None:
    fake.slow_seconds = 0.3
    fake.fail("slow", times=1)
    with pytest.raises(httpx.ReadTimeout):
        http.get(f"{fake.url}/api/version", timeout=0.1)
    assert http.get(f"{fake.url}/api/version", timeout=1).status_code == 200


def test_refuse_and_recover_same_port(http: httpx.Client, fake: FakeOllama) -> None:
    url = fake.url
    fake.fail("refuse")
    with pytest.raises(httpx.ConnectError):
        http.get(f"{url}/api/version", timeout=1)
    fake.recover()
    assert fake.url == url
    assert http.get(f"{url}/api/version").status_code == 200


def test_invalid_mode_arguments(fake: FakeOllama) -> None:
    with pytest.raises(ValueError):
        fake.fail("explode")
    with pytest.raises(ValueError):
        fake.fail("refuse", times=1)


def test_independent_instance_context_manager(http: httpx.Client) -> None:
    with FakeOllama(dim=8) as other:
        assert other.running
        assert http.get(f"{other.url}/").text == "Ollama is running"
    assert not other.running
