"""README.md's first ```python block is a quickstart that runs as it is against a live
service, with NAVI_URL and NAVI_TOKEN set."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import Live

README = Path(__file__).resolve().parents[1] / "README.md"
SRC = Path(__file__).resolve().parents[1] / "src"


def first_python_block(text: str) -> str:
    match = re.search(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert match, "README.md has no ```python block"
    return match.group(1)


def test_the_first_block_is_the_quickstart() -> None:
    code = first_python_block(README.read_text())
    assert 'os.environ["NAVI_URL"]' in code and 'os.environ["NAVI_TOKEN"]' in code
    for step in ("create_session", "append_messages", "search_memory", "print("):
        assert step in code, step


def test_quickstart_runs_as_is(live: Live, user: tuple[str, str]) -> None:
    code = first_python_block(README.read_text())
    env = {
        **os.environ,
        "NAVI_URL": live.base_url,
        "NAVI_TOKEN": user[1],
        # the package as it is in the checkout, installed or not
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines, "the quickstart found nothing"
    assert any(line.startswith("[raw]") and "6543" in line for line in lines), run.stdout
