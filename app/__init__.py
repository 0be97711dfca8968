"""Navi: a self-hosted memory and session service for LLM agents."""

#: The one version number of the service: pyproject.toml reads it (dynamic), the OpenAPI
#: document and the MCP server report it. CHANGELOG.md says what each version holds.
__version__ = "0.1.0"
