"""Export a user's memory as NDJSON and import it into an empty account (docs/api.md)."""
