"""Regenerate the settings table of docs/configuration.md from the declarations in app/config.py
(`app.config.FIELDS`, the view of the `Settings` fields declared with `setting()`).

Usage: .venv/bin/python scripts/gen_config_doc.py  (rewrites the text between the markers)
"""

from __future__ import annotations

from pathlib import Path

from app.config import FIELDS

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
START, END = "<!-- settings:start -->", "<!-- settings:end -->"


def table() -> str:
    lines = ["| setting | env var | default | meaning |", "|---|---|---|---|"]
    for name, spec in FIELDS.items():
        default = (
            "unset"
            if spec.default is None
            else repr(spec.default)
            if spec.default == ""
            else spec.default
        )
        if isinstance(spec.default, bool):
            default = str(spec.default).lower()
        extra = ""
        if spec.choices:
            extra = f" One of {', '.join(spec.choices)}."
        elif spec.ge is not None or spec.le is not None:
            lo = "" if spec.ge is None else f"{spec.ge:g}"
            hi = "" if spec.le is None else f"{spec.le:g}"
            extra = f" Range {lo}…{hi}."
        lines.append(f"| `{name}` | `{spec.env}` | `{default}` | {spec.doc}{extra} |")
    return "\n".join(lines)


def main() -> None:
    text = DOC.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{START}\n{table()}\n{END}{tail}")


if __name__ == "__main__":
    main()
