"""`--embedder local|fake` of the LoCoMo and breadcrumbs benches, settled before app imports.

The vector columns follow the embedder (384-d for the local model), so the environment
must say `EMBEDDING_PROVIDER=local` before `app.config` reads it."""

from __future__ import annotations

import os


def embedder_arg(argv: list[str], default: str = "local") -> str:
    for i, a in enumerate(argv):
        if a == "--embedder" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--embedder="):
            return a.split("=", 1)[1]
    return default


def select_embedder(argv: list[str]) -> None:
    if embedder_arg(argv) == "local":
        os.environ["EMBEDDING_PROVIDER"] = "local"
        os.environ.pop("EMBEDDING_DIM", None)
