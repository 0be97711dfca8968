"""All SQLAlchemy models; importing this package registers every table on Base.metadata."""

from app.db.models.history import ErrorMemory, MessageEmbedding, RollingSummary
from app.db.models.jobs import ForgetJob, ForgottenText
from app.db.models.memory import (
    FactVersion,
    MemoryChunk,
    MemoryChunkCount,
    MemoryChunkVector,
    MemoryFact,
    MemorySummary,
    RawIndexState,
    SessionMemoryState,
)
from app.db.models.sessions import (
    Message,
    MessageArchive,
    PlanningEntry,
    Session,
    SessionShare,
)
from app.db.models.sketches import Sketch
from app.db.models.users import ApiToken, User

__all__ = [
    "ApiToken",
    "ErrorMemory",
    "FactVersion",
    "ForgetJob",
    "ForgottenText",
    "MemoryChunk",
    "MemoryChunkCount",
    "MemoryChunkVector",
    "MemoryFact",
    "MemorySummary",
    "Message",
    "MessageArchive",
    "MessageEmbedding",
    "PlanningEntry",
    "RawIndexState",
    "RollingSummary",
    "Session",
    "SessionMemoryState",
    "SessionShare",
    "Sketch",
    "User",
]
