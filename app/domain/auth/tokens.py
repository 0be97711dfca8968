"""Bearer tokens: random, stored and looked up as SHA-256, never logged."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "navi_"


def new_token() -> str:
    """A token with 32 random bytes (256 bits) of entropy."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def display_prefix(token: str) -> str:
    """The first characters, enough to tell tokens apart in a listing."""
    return token[: len(TOKEN_PREFIX) + 6]
