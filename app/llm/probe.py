"""What an embedder says about itself (shared by every embedder module), and the
gateway's verdict on it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EmbedProbe:
    """What an :class:`~app.llm.embedders.Embedder` says about itself (the gateway checks
    the dimension)."""

    reachable: bool
    dim: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class EmbedHealth:
    """Outcome of :meth:`~app.llm.gateway.LLMGateway.check_embedding`.

    ``reachable``: the embedding host answered at all (even with an error status).
    ``ok``: the model answered and its dimension equals ``expected_dim``.
    """

    reachable: bool
    ok: bool
    model: str
    expected_dim: int
    dim: int | None = None
    error: str | None = None


def embed_health(probe: EmbedProbe, model: str, expected_dim: int) -> EmbedHealth:
    """The gateway's verdict on an embedder's probe: a dimension other than
    `expected_dim` is an error."""
    error = probe.error
    if error is None and probe.dim is not None and probe.dim != expected_dim:
        error = f"dimension mismatch: model returned {probe.dim}, expected {expected_dim}"
    return EmbedHealth(
        reachable=probe.reachable,
        ok=probe.reachable and error is None and probe.dim == expected_dim,
        model=model,
        expected_dim=expected_dim,
        dim=probe.dim,
        error=error,
    )
