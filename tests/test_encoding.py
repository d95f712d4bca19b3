"""Request bodies: each stored message is encoded once, and the bytes are json.dumps' own."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lsp_agent.messages import Message
from lsp_agent.model.encoding import RequestEncoder, dumps, json_object


def reference(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def conversation(turns: int) -> list[Message]:
    history: list[Message] = [{"role": "system", "content": "You are a test."}]
    for n in range(turns):
        history.append({"role": "user", "content": f"question {n} é 😀"})
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        }
        history.append({"role": "assistant", "content": "", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{n}", "content": 'line\n\t"q"\\ \x01'})
    return history


texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": texts | st.none()}
    ),
    min_size=1,
    max_size=6,
)


@given(messages)
def test_the_messages_are_the_bytes_json_dumps_gives(sent: list[Message]) -> None:
    sent = [{"role": "system", "content": "s"}, *sent]
    expected = [
        {**m, "content": ""} if m["role"] == "assistant" and m["content"] is None else m
        for m in sent
    ]
    encoder = RequestEncoder()
    assert encoder.messages(sent) == reference(expected)
    assert encoder.messages(sent) == reference(expected)  # from the cache, the same bytes


def test_a_body_is_byte_identical_to_the_whole_body_encoded_at_once() -> None:
    history = conversation(3)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    body = json_object(
        [
            ("model", dumps("test-model")),
            ("messages", RequestEncoder().messages(history)),
            ("tools", dumps(tools)),
            ("stream", dumps(True)),
        ]
    )
    whole = {"model": "test-model", "messages": history, "tools": tools, "stream": True}
    assert body == reference(whole)


def test_a_longer_history_encodes_only_its_new_messages() -> None:
    encoder = RequestEncoder()
    history = conversation(50)
    reminder: Message = {"role": "user", "content": "<context>now</context>"}
    first = encoder.messages([*history, reminder])
    assert encoder.encoded == len(history) + 1

    before = encoder.encoded
    history.append({"role": "assistant", "content": "Done."})
    reminder = {"role": "user", "content": "<context>later</context>"}
    second = encoder.messages([*history, reminder])
    assert encoder.encoded == before + 2  # the answer and the new reminder
    assert second.startswith(first[: -len(reference(reminder)) - 1])  # the prefix is kept


def test_a_rewritten_message_is_a_new_dict_and_is_encoded_anew() -> None:
    encoder = RequestEncoder()
    history = conversation(3)
    encoder.messages(history)
    stubbed = list(history)
    stubbed[3] = {**history[3], "content": "[trimmed]"}
    before = encoder.encoded
    assert encoder.messages(stubbed) == reference(stubbed)
    assert encoder.encoded == before + 1


def test_a_message_mutated_in_place_is_not_sent_stale() -> None:
    encoder = RequestEncoder()
    history = conversation(2)
    encoder.messages(history)
    history[3]["content"] = "changed behind the cache's back"
    assert encoder.messages(history) == reference(history)


def test_messages_that_left_the_request_leave_the_cache() -> None:
    encoder = RequestEncoder()
    history = conversation(10)
    encoder.messages(history)
    compacted = [history[0], {"role": "user", "content": "note"}, *history[-3:]]
    encoder.messages(compacted)
    encoder.messages(history)
    assert encoder.encoded == len(history) + 1 + (len(history) - 4)


def test_sessions_side_by_side_keep_their_messages_encoded() -> None:
    encoder = RequestEncoder()
    one, two = conversation(5), conversation(5)
    for _ in range(3):
        encoder.messages(one)
        encoder.messages(two)
    assert encoder.encoded == len(one) + len(two)


def test_a_lone_surrogate_is_sent_repaired_instead_of_failing_the_request() -> None:
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "bad \ud83d half"}]
    sent = RequestEncoder().messages(history)
    assert json.loads(sent)[1]["content"] == "bad \ufffd half"
    assert history[1]["content"] == "bad \ud83d half"  # what is stored is not touched here
