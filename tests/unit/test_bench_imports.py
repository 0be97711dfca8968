"""The benches import every `app.*` name through bench/_app.py: a rename in app/ must
show here, not when someone next runs a bench (bench/_app.py once imported a function
the export's rework had moved, and every bench failed at start)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench_app():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        import _app  # type: ignore[import-not-found]

        yield _app
    finally:
        sys.path.remove(str(BENCH))


def test_every_name_the_benches_take_from_app_exists(bench_app) -> None:  # type: ignore[no-untyped-def]
    missing = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "_app":
                missing += [
                    f"{path.name}: {a.name}" for a in node.names if not hasattr(bench_app, a.name)
                ]
    assert missing == []
