import base64

import pytest

from app.config import Settings
from app.domain.context.pricing import baseline_of
from app.domain.context.schemas import IncomingMessage
from app.domain.context.services import incoming_msg
from app.lib.errors import PayloadTooLarge, Unprocessable
from tests.unit.compression.images import png


def test_baseline_only_for_the_same_model() -> None:
    meta = {"baseline": {"tokens": 900, "count": 12, "model": "m1"}}
    assert baseline_of(meta, "m1") == (900, 12)
    assert baseline_of(meta, "m2") == (None, 0)
    assert baseline_of({}, "m1") == (None, 0)
    assert baseline_of(None, "m1") == (None, 0)
    assert baseline_of({"baseline": {"model": "m1", "tokens": "x", "count": 1}}, "m1") == (None, 0)


def test_incoming_message_decodes_images() -> None:
    img = png(10, 10)
    msg = incoming_msg(
        IncomingMessage(content="hi", images=[base64.b64encode(img).decode()]), Settings()
    )
    assert msg is not None and msg.role == "user" and msg.images == [img]
    assert incoming_msg(None, Settings()) is None


def test_incoming_message_is_validated() -> None:
    with pytest.raises(Unprocessable, match=r"message.images\[1\]"):
        incoming_msg(IncomingMessage(images=["aGk=", "@@"]), Settings())
    with pytest.raises(PayloadTooLarge, match="message.content"):
        incoming_msg(IncomingMessage(content="x" * 11), Settings(message_max_chars=10))
