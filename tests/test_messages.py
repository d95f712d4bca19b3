"""Chat messages: text that cannot be encoded is repaired, and nothing else is touched."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_agent.messages import (
    REPLACEMENT,
    Reply,
    ToolCall,
    Usage,
    clean_text,
    clean_value,
    frozen,
)
from lsp_agent.model.stream import Surrogates

EMOJI = "\U0001f600"
HIGH, LOW = "\ud83d", "\ude00"  # EMOJI as UTF-16


def test_an_emoji_split_into_its_two_halves_is_joined() -> None:
    assert clean_text(f"ok {HIGH}{LOW}!") == (f"ok {EMOJI}!", 0)


def test_a_lone_half_becomes_the_replacement_character() -> None:
    assert clean_text(f"a{HIGH}b{LOW}") == (f"a{REPLACEMENT}b{REPLACEMENT}", 2)


def test_text_without_surrogates_is_returned_as_is() -> None:
    text = "plain, é and 😀"
    assert clean_text(text)[0] is text


@given(st.text(alphabet=st.characters(codec=None), max_size=50))
def test_any_text_comes_out_encodable(text: str) -> None:
    cleaned, _ = clean_text(text)
    cleaned.encode("utf-8")  # never raises
    if not any("\ud800" <= c <= "\udfff" for c in text):
        assert cleaned == text


@given(st.lists(st.text(alphabet=st.characters(codec=None), max_size=8), max_size=8))
def test_pieces_fed_one_by_one_give_the_whole_text_cleaned(pieces: list[str]) -> None:
    joiner = Surrogates()
    shown = [joiner.feed(piece) for piece in pieces] + [joiner.finish()]
    for piece in shown:
        piece.encode("utf-8")
    assert "".join(shown) == clean_text("".join(pieces))[0]


def test_values_are_cleaned_deep_and_left_alone_when_clean() -> None:
    message: dict[str, Any] = {"role": "tool", "content": [{"type": "text", "text": f"x{HIGH}"}]}
    cleaned, lone = clean_value(message)
    assert lone == 1
    assert cleaned == {"role": "tool", "content": [{"type": "text", "text": f"x{REPLACEMENT}"}]}
    assert message["content"][0]["text"] == f"x{HIGH}"  # the original is not mutated
    clean = {"role": "user", "content": "hi"}
    assert clean_value(clean)[0] is clean


def test_a_reply_is_stored_with_empty_content_beside_its_calls() -> None:
    call = ToolCall("c1", "read_file", '{"path": "a.py"}')
    reply = Reply("", (call,), Usage(10, 2, None, False), "tool_calls")
    assert reply.message() == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": call.arguments},
            }
        ],
    }


def test_a_frozen_message_cannot_be_changed_in_place_but_reads_and_copies_as_a_dict() -> None:
    message = frozen({"role": "tool", "tool_call_id": "c1", "content": "result"})
    changes: list[Callable[[dict[str, Any]], object]] = [
        lambda m: m.__setitem__("content", "changed"),
        lambda m: m.__delitem__("content"),
        lambda m: m.update(content="changed"),
        lambda m: m.setdefault("name", "x"),
        lambda m: m.pop("content"),
        lambda m: m.popitem(),
        lambda m: m.clear(),
        lambda m: m.__ior__({"content": "changed"}),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="cannot be changed"):
            change(message)
    assert message == {"role": "tool", "tool_call_id": "c1", "content": "result"}
    assert json.loads(json.dumps(message)) == message
    assert copy.copy(message) == message
    assert copy.deepcopy(message) == message
    assert pickle.loads(pickle.dumps(message)) == message
    assert type({**message, "content": "stub"}) is dict
    assert frozen(message) is message
