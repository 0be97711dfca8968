"""Top functions of py-spy's raw (collapsed-stack) output, by inclusive and by self share.

    .venv/bin/python bench/_profile.py bench/.cache/load-profile.txt [more files…] [--top 25]

A raw file holds one line per distinct stack: `frame;frame;…;leaf <samples>`, a frame
`function (file:line)`. A function's **inclusive** share is the share of samples whose
stack holds it (counted once per stack, recursion included); its **self** share, the
share of samples where it is the leaf. The line numbers are dropped, so a function is
one row whichever of its lines was running; paths are shortened to the package
(`site-packages/` and the checkout's root cut off). Several files (one per worker) add up.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_LINE = re.compile(r"^(.*?) ?(\d+)$")
_FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")
_ROOT = str(Path(__file__).resolve().parents[1]) + "/"


def _short(path: str) -> str:
    for cut in ("site-packages/", "/lib/python3"):
        if cut in path:
            path = path.split(cut, 1)[1]
            return path.split("/", 1)[1] if cut == "/lib/python3" and "/" in path else path
    return path.removeprefix(_ROOT)


def function_of(frame: str) -> str:
    """`name (file:line)` → `name (file)` with the file shortened."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    return f"{m.group(1)} ({_short(m.group(2))})"


NO_FRAME = "(no Python frame)"


@dataclass
class Profile:
    samples: int
    inclusive: Counter[str]
    self_: Counter[str]
    trunk: list[str]  # the frames the largest share of the samples all pass through

    def top(self, which: str, n: int) -> list[tuple[str, int, float]]:
        """The n first functions by `which` share; the trunk is left out of the inclusive
        one (the process's `main` … the event loop's `run`: every request under it)."""
        counts = self.inclusive if which == "inclusive" else self.self_
        skip = set(self.trunk) if which == "inclusive" else set()
        total = max(self.samples, 1)
        ranked = [(fn, c) for fn, c in counts.most_common() if fn not in skip][:n]
        return [(fn, c, 100.0 * c / total) for fn, c in ranked]


def trunk_of(stacks: list[tuple[list[str], int]]) -> list[str]:
    """The frames from the root down to the first branching, of the stacks under the
    most sampled root frame (py-spy shows SQLAlchemy's greenlets as stacks of their own,
    rooted at `Session.execute` & co: they have their own roots)."""
    roots: Counter[str] = Counter()
    for frames, count in stacks:
        roots[frames[0]] += count
    if not roots:
        return []
    group = [f for f, _ in stacks if f[0] == roots.most_common(1)[0][0]]
    trunk: list[str] = []
    for depth in range(max(len(f) for f in group)):
        if any(len(f) <= depth for f in group):  # a stack ended above: it branched
            break
        names = {f[depth] for f in group}
        if len(names) != 1:
            break
        trunk.append(names.pop())
    return trunk


def parse(lines: Iterable[str]) -> Profile:
    samples = 0
    inclusive: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    stacks: list[tuple[list[str], int]] = []
    for raw in lines:
        m = _LINE.match(raw.rstrip("\n"))
        if not m:
            continue
        count = int(m.group(2))
        frames = [function_of(f) for f in m.group(1).split(";") if f.strip()] or [NO_FRAME]
        samples += count
        for fn in set(frames):
            inclusive[fn] += count
        self_[frames[-1]] += count
        if frames != [NO_FRAME]:
            stacks.append((frames, count))
    return Profile(samples, inclusive, self_, trunk_of(stacks))


def load(paths: Iterable[Path]) -> Profile:
    lines: list[str] = []
    for path in paths:
        lines.extend(path.read_text(errors="replace").splitlines())
    return parse(lines)


def report(profile: Profile, top: int = 25) -> str:
    """The two tables as text (markdown, to paste into docs)."""
    out = [f"{profile.samples:,} samples (active threads only)"]
    if profile.trunk:
        share = 100.0 * profile.inclusive[profile.trunk[0]] / max(profile.samples, 1)
        out.append(
            f"trunk, left out of the inclusive table ({share:.1f} %): "
            f"`{profile.trunk[0]}` … `{profile.trunk[-1]}` ({len(profile.trunk)} frames)"
        )
    for which in ("inclusive", "self"):
        out += ["", f"| {which} % | samples | function |", "|---:|---:|---|"]
        out += [f"| {p:.1f} | {c:,} | `{fn}` |" for fn, c, p in profile.top(which, top)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="py-spy --format raw files")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(report(load(args.paths), args.top))


if __name__ == "__main__":
    main()
