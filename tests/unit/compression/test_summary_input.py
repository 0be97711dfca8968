from __future__ import annotations

import pytest

from app.domain.compression import Msg
from app.domain.compression.summary_input import (
    SummaryInput,
    cut_summary_input,
    format_for_summary,
    format_message,
    needs_meta_summary,
    split_keys_line,
    tool_call_preview,
)

from .images import png


def call(name: str, **args: object) -> dict[str, object]:
    return {"function": {"name": name, "arguments": args}}


# --- formatting -----------------------------------------------------------


def test_roles_are_labelled() -> None:
    out = format_for_summary(
        [Msg("user", "hello"), Msg("assistant", "hi there"), Msg("user", "S", is_summary=True)],
        window=10_000,
    )
    assert out.text == "User: hello\n\nAssistant: hi there\n\nEarlier summary:\nS"
    assert out.images == [] and out.omitted_images == 0


def test_tool_call_preview_cuts_args_to_120_chars() -> None:
    short = tool_call_preview(call("read_file", path="/a"))
    assert short == '→ read_file({"path":"/a"})'
    long_preview = tool_call_preview(call("write_file", path="/a", content="x" * 500))
    args = long_preview[len("→ write_file(") : -1]
    assert len(args) == 120
    assert args.endswith("…")
    assert args.startswith('{"path":"/a","content":"xxx')


def test_tool_call_preview_accepts_string_arguments_and_odd_shapes() -> None:
    assert tool_call_preview({"function": {"name": "f", "arguments": "{}"}}) == "→ f({})"
    assert tool_call_preview({"name": "g", "arguments": {}}) == "→ g({})"
    assert tool_call_preview({}) == "→ tool({})"


def test_assistant_tool_calls_are_listed_under_the_message() -> None:
    msg = Msg("assistant", "", tool_calls=[call("ls", path="."), call("cat", path="f")])
    assert format_message(msg) == 'Assistant:\n  → ls({"path":"."})\n  → cat({"path":"f"})'
    msg.content = "Checking."
    assert format_message(msg).startswith("Assistant: Checking.\n  → ls(")


def test_non_critical_tool_result_is_an_800_char_preview() -> None:
    text = "a" * 800 + "b" * 1200
    out = format_message(Msg("tool", text, name="grep"))
    body = out[len("Tool result (grep): ") :]
    assert body.startswith("a" * 800)
    assert "b" not in body.split("…")[0]
    assert body.endswith("… [+1200 chars]")
    assert format_message(Msg("tool", "a" * 800, name="grep")) == "Tool result (grep): " + "a" * 800


def test_critical_tool_result_is_verbatim_up_to_4000() -> None:
    text = "c" * 4000
    out = format_message(Msg("tool", text, name="x", is_compression_critical=True))
    assert out == "Tool result (x): " + text


def test_critical_tool_result_over_4000_keeps_2000_plus_2000() -> None:
    text = "H" * 2000 + "M" * 3000 + "T" * 2000
    out = format_message(Msg("tool", text, is_compression_critical=True))
    body = out[len("Tool result: ") :]
    head, marker, tail = body.split("\n")
    assert head == "H" * 2000
    assert tail == "T" * 2000
    assert "3000 chars elided" in marker


def test_critical_tool_names() -> None:
    text = "d" * 3000
    msg = Msg("tool", text, name="run_tests")
    assert text in format_message(msg, critical_tools={"run_tests"})
    assert text not in format_message(msg)
    out = format_for_summary([msg], window=1000, critical_tools=["run_tests"])
    assert text in out.text


# --- images ---------------------------------------------------------------


def test_images_within_a_quarter_window() -> None:
    img = png(1024, 1024)  # 1026 tokens each
    msgs = [Msg("user", "shots", images=[img, img, img]), Msg("tool", "r", images=[img])]
    out = format_for_summary(msgs, window=8400)  # budget 2100 → two images
    assert out.images == [img, img]
    assert out.omitted_images == 2
    assert out.image_tokens == 2052
    assert "[2 image(s) attached]\n[+ 1 image(s)]" in out.text
    assert out.text.endswith("Tool result: r\n[+ 1 image(s)]")


def test_images_first_fit_admits_a_later_small_image() -> None:
    big, small = png(2048, 2048), png(64, 64)  # 4098 and 256 tokens
    out = format_for_summary([Msg("user", "x", images=[big, small])], window=4000)
    assert out.images == [small]
    assert out.omitted_images == 1


def test_image_budget_fraction_and_fallback() -> None:
    junk = b"not-an-image"
    out = format_for_summary(
        [Msg("user", "x", images=[junk, junk])],
        window=1000,
        image_budget_frac=1.0,
        image_fallback=500,
    )
    assert len(out.images) == 2 and out.image_tokens == 1000
    none = format_for_summary([Msg("user", "x", images=[junk])], window=1000, image_budget_frac=0)
    assert none.images == [] and none.omitted_images == 1


def test_summary_input_type() -> None:
    assert SummaryInput("t").images == []


# --- 32k cut --------------------------------------------------------------


def test_cut_keeps_short_text() -> None:
    assert cut_summary_input("abc") == "abc"
    text = "x" * 32_000
    assert cut_summary_input(text) is text


def test_cut_keeps_75_percent_head_and_25_percent_tail() -> None:
    text = "".join(f"{i:06d}\n" for i in range(20_000))  # 140k chars
    out = cut_summary_input(text)
    assert len(out) <= 32_000
    head, _, tail = out.partition("\n\n[…")
    tail = tail.split("…]\n\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) > 31_900
    assert len(head) / (len(head) + len(tail)) == pytest.approx(0.75, abs=0.001)


def test_cut_custom_budget_and_degenerate_budget() -> None:
    out = cut_summary_input("a" * 600 + "b" * 400, max_chars=200)
    assert len(out) <= 200 and out.startswith("a") and out.endswith("b")
    assert cut_summary_input("abcdef" * 10, max_chars=5) == "abcde"


# --- meta summary ---------------------------------------------------------


def test_meta_summary_threshold() -> None:
    s1 = Msg("user", "a" * 5300, is_summary=True)
    s2 = Msg("user", "b" * 5300, is_summary=True)
    s3 = Msg("user", "c" * 5301, is_summary=True)
    plain = Msg("user", "d" * 50_000)
    assert not needs_meta_summary([s1, s2])  # exactly 10_600: not over
    assert needs_meta_summary([s1, s3])
    assert not needs_meta_summary([Msg("user", "x" * 50_000, is_summary=True), plain])
    assert needs_meta_summary([s1, plain, s3])
    assert needs_meta_summary([s1, s2], threshold=100)


# --- KEYS line ------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "KEYS: alpha, beta, gamma",
        "keys: alpha, beta, gamma",
        "**KEYS:** alpha, beta, gamma",
        "**KEYS**: alpha, beta, gamma",
        "`KEYS: alpha, beta, gamma`",
        "- KEYS: `alpha`, `beta`, `gamma`",
        "Keys:alpha,beta,gamma.",
        "KEYS: alpha; beta; gamma",
        "KEYS: alpha, Beta, beta, , gamma, ALPHA",
    ],
)
def test_keys_line_variants(line: str) -> None:
    summary, keys = split_keys_line(f"- did a\n- did b\n\n{line}\n\n")
    assert summary == "- did a\n- did b"
    assert [k.lower() for k in keys] == ["alpha", "beta", "gamma"]


@pytest.mark.parametrize(
    "line", ["KEYS: NONE", "keys: none", "**KEYS:** None.", "KEYS:", "KEYS: -"]
)
def test_keys_none(line: str) -> None:
    assert split_keys_line(f"summary\n{line}") == ("summary", [])


def test_no_keys_line_returns_text_unchanged() -> None:
    text = "- point one\n- Keys to the car were lost\n"
    assert split_keys_line(text) == (text, [])
    assert split_keys_line("") == ("", [])
    mid = "KEYS: a, b\n- more text after"
    assert split_keys_line(mid) == (mid, [])


def test_keys_are_deduped_keeping_first_spelling_and_capped_at_30() -> None:
    items = [f"k{i}" for i in range(40)]
    _, keys = split_keys_line("s\nKEYS: Foo, foo, " + ", ".join(items))
    assert keys[0] == "Foo"
    assert len(keys) == 30
    assert keys[1:] == items[:29]


def test_keys_keep_paths_and_commands() -> None:
    _, keys = split_keys_line("s\nKEYS: /etc/nginx/nginx.conf, `docker compose up -d`, JIRA-123")
    assert keys == ["/etc/nginx/nginx.conf", "docker compose up -d", "JIRA-123"]
