"""Forget a text: redact every occurrence of it in everything a user owns (issue 29)."""
