from __future__ import annotations

import uuid
from datetime import datetime

import msgspec


class UserCreate(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    is_admin: bool = False
    permissions: list[str] = msgspec.field(default_factory=list)


class UserOut(msgspec.Struct):
    id: str
    name: str
    is_admin: bool
    permissions: list[str]
    created_at: datetime


class TokenCreate(msgspec.Struct, forbid_unknown_fields=True):
    name: str = ""


class TokenOut(msgspec.Struct):
    id: uuid.UUID
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    expires_at: datetime | None = None


class TokenIssued(msgspec.Struct):
    """The only response that ever carries the token itself."""

    id: uuid.UUID
    user_id: str
    name: str
    token: str


class MeOut(msgspec.Struct):
    id: str
    name: str
    is_admin: bool
    permissions: list[str]
    auth_enabled: bool


class UserDeletionOut(msgspec.Struct):
    """A user deletion still running (202), or its state later."""

    user_id: str
    state: str  # deleting | deleted | active (not being deleted)
    sessions_left: int
    status_url: str
