"""The notice appended to the LLM copy of a message that carried pasted images.

Pure functions. The budget is `0.8 × window − estimated context tokens`; each image is
charged its own cost (`image_tokens`, by pixel area). Images are admitted in order while
they fit: the first one that does not fit and every later one are "not loaded", and the
notice names their files for the `image_view` tool instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "IMAGE_BUDGET_SHARE",
    "admitted_images",
    "image_budget",
    "image_notice",
    "image_view_refusal",
]

IMAGE_BUDGET_SHARE = 0.8


def image_budget(window: int, context_tokens: int) -> int:
    return math.floor(IMAGE_BUDGET_SHARE * window) - context_tokens


def admitted_images(costs: Sequence[int], budget: int) -> int:
    """How many leading images fit into `budget` tokens."""
    spent = 0
    for i, cost in enumerate(costs):
        if spent + cost > budget:
            return i
        spent += cost
    return len(costs)


def image_notice(total: int, in_context: int, paths: Sequence[str | None]) -> str | None:
    """The notice for `total` images of which the first `in_context` reach the model.

    `paths[i]` is where image i was stored (None when it could not be); the notice
    names only stored files, and there is no notice when nothing was stored.
    """
    if not any(paths):
        return None
    if in_context >= total:
        on_disk = ", ".join(p for p in paths if p)
        return (
            f"[{total} images attached inline — already in your context, no extra loading "
            f"needed.\nOn disk: {on_disk}]"
        )
    rest = ", ".join(p for p in paths[in_context:] if p)
    return (
        f"[{total} images attached inline — {in_context} are in your context, the rest were "
        f"not loaded;\nopen them with image_view: {rest}]"
    )


def image_view_refusal(path: str, cost: int, room: int) -> str:
    """The tool result of an `image_view` whose image the window cannot take now."""
    return (
        f"image_view: {path} was not loaded: it would take about {cost} tokens and only "
        f"{max(0, room)} are left for images in this model's context window (80% of the "
        "window minus the conversation so far). Go on without it, or ask the user to "
        "describe it or send a smaller copy."
    )
