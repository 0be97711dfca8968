"""Pure context-compression logic: token accounting, partitioning, summary I/O.

No database, network or file access happens in this package; the services
that own sessions and the LLM client call into it.
"""

from .calibration import (
    TRUNCATED_MIN_WINDOW_SHARE,
    TRUNCATION_RATIO,
    Calibration,
    calibration_for,
    is_plausible_count,
    is_truncated_prompt,
    max_overhead,
    record_real_baseline,
    reset_registry,
)
from .estimate import (
    ContextTooLargeError,
    added_tokens,
    check_context_size,
    context_chars,
    context_limit,
    estimate_tokens,
    images_tokens,
    message_chars,
    real_baseline_estimate,
    truncate_for_view,
    view_budget_tokens,
)
from .image_tokens import image_dimensions, image_extension, image_tokens
from .planner import (
    Estimator,
    Plan,
    partition_current_turn,
    plan_compression,
    turn_importance,
    would_compress,
)
from .summary_input import (
    MAX_SUMMARY_INPUT_CHARS,
    META_SUMMARY_THRESHOLD,
    SummaryInput,
    cut_summary_input,
    format_for_summary,
    needs_meta_summary,
    split_keys_line,
)
from .truncate import HARD_TRUNCATE_TOKEN_FRAC, hard_truncate
from .turns import Turn, split_system, split_turns, tool_units
from .types import Msg

__all__ = [
    "HARD_TRUNCATE_TOKEN_FRAC",
    "MAX_SUMMARY_INPUT_CHARS",
    "META_SUMMARY_THRESHOLD",
    "TRUNCATED_MIN_WINDOW_SHARE",
    "TRUNCATION_RATIO",
    "Calibration",
    "ContextTooLargeError",
    "Estimator",
    "Msg",
    "Plan",
    "SummaryInput",
    "Turn",
    "added_tokens",
    "calibration_for",
    "check_context_size",
    "context_chars",
    "context_limit",
    "cut_summary_input",
    "estimate_tokens",
    "format_for_summary",
    "hard_truncate",
    "image_dimensions",
    "image_extension",
    "image_tokens",
    "images_tokens",
    "is_plausible_count",
    "is_truncated_prompt",
    "max_overhead",
    "message_chars",
    "needs_meta_summary",
    "partition_current_turn",
    "plan_compression",
    "real_baseline_estimate",
    "record_real_baseline",
    "reset_registry",
    "split_keys_line",
    "split_system",
    "split_turns",
    "tool_units",
    "truncate_for_view",
    "turn_importance",
    "view_budget_tokens",
    "would_compress",
]
