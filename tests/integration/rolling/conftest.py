"""Fixtures of the rolling-summary tests."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from app.config import Settings


@pytest.fixture
def rolling_settings(settings: Settings, tmp_path: Path) -> Settings:
    profiles = tmp_path / "profiles.json"
    profiles.write_text(
        json.dumps(
            {
                "chat": {"context_mode": "rolling", "reply_lang": "zh-TW"},
                "temp-scratch": {"context_mode": "rolling"},
            }
        )
    )
    return replace(settings, profiles_file=str(profiles), rolling_summary_chunk_chars=1400)
