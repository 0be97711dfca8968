"""The suite's fake Ollama (tests/fakes) as a process of its own, for the live tests.

    cd <repo> && .venv/bin/python clients/typescript/test/fake_ollama.py --port 11500

Chat replies follow the request, so any number of test runs see the same script:

- the newest message is a tool result           -> "Done: <that result>."
- the user asks to "use the memory_search tool" -> a `memory_search` call (built-in)
- the user asks to "call <name>" and the request offers the tool <name>
                                                -> a call of it (the client's tool)
- anything else                                 -> "Hello from the fake model."

Embeddings are the fake's deterministic bag of words (768 dimensions by default).
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # the repository
sys.path.insert(0, str(ROOT))

from tests.fakes.chat_script import ScriptedReply  # noqa: E402
from tests.fakes.ollama_server import FakeOllama  # noqa: E402

PLAIN = "Hello from the fake model."


def reply_for(body: dict[str, Any]) -> ScriptedReply:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return ScriptedReply(f"Done: {str(last.get('content') or '')[:80]}.")
    text = str(last.get("content") or "") if last.get("role") == "user" else ""
    if "use the memory_search tool" in text:
        return ScriptedReply(
            "Let me look.",
            tool_calls=[{"name": "memory_search", "arguments": {"query": "staging port"}}],
        )
    offered = {
        str((t.get("function") or {}).get("name"))
        for t in body.get("tools") or []
        if isinstance(t, dict)
    }
    asked = re.search(r"\bcall (\w+)", text)
    if asked and asked.group(1) in offered:
        return ScriptedReply(tool_calls=[{"name": asked.group(1), "arguments": {"cmd": "ls"}}])
    return ScriptedReply(PLAIN)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dim", type=int, default=768)
    args = parser.parse_args()
    fake = FakeOllama(dim=args.dim, port=args.port, keep_alive=True)
    fake._next_reply = reply_for  # type: ignore[method-assign]  # the script above
    fake.start()
    print(fake.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
