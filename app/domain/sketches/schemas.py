from __future__ import annotations

from datetime import datetime

import msgspec


class SketchIn(msgspec.Struct, forbid_unknown_fields=True):
    value: str


class SketchOut(msgspec.Struct):
    section: str
    value: str
    updated_at: datetime
