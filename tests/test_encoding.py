"""Request bodies: each stored message is encoded once, and the bytes are json.dumps' own."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lsp_agent.messages import Message, frozen
from lsp_agent.model.encoding import (
    LARGE_PART,
    SLICE_CHARS,
    RequestEncoder,
    dumps,
    json_object,
    json_parts,
)
from lsp_agent.model.stream import Pacer


async def encode(
    encoder: RequestEncoder, messages: list[Message], pacer: Pacer | None = None
) -> bytes:
    """The messages' JSON array as the encoder gives it, joined."""
    return b"".join(await encoder.messages(messages, pacer))


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
    assert asyncio.run(encode(encoder, sent)) == reference(expected)
    assert asyncio.run(encode(encoder, sent)) == reference(expected)  # the cache's bytes


async def test_a_body_is_byte_identical_to_the_whole_body_encoded_at_once() -> None:
    history = conversation(3)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    body = json_object(
        [
            ("model", dumps("test-model")),
            ("messages", await RequestEncoder().messages(history)),
            ("tools", dumps(tools)),
            ("stream", dumps(True)),
        ]
    )
    whole = {"model": "test-model", "messages": history, "tools": tools, "stream": True}
    assert body == reference(whole)


async def test_a_body_in_parts_is_the_body_and_its_large_parts_are_not_copied() -> None:
    encoder = RequestEncoder()
    history = [*conversation(3), {"role": "tool", "tool_call_id": "c", "content": "x" * LARGE_PART}]
    for _ in range(2):  # the second time, the history's bytes are one joined run
        history.append({"role": "user", "content": "<context>now</context>"})
        encoded = await encoder.messages(history)
        members: list[tuple[str, bytes | list[bytes]]] = [
            ("model", dumps("test-model")),
            ("messages", encoded),
            ("stream", dumps(True)),
        ]
        parts = json_parts(members)
        assert (
            b"".join(parts)
            == json_object(members)
            == reference({"model": "test-model", "messages": history, "stream": True})
        )
        large = [part for part in encoded if len(part) >= LARGE_PART]
        assert large
        assert all(any(part is sent for sent in parts) for part in large)
        # Small parts are joined: never two small parts side by side.
        sizes = [len(part) >= LARGE_PART for part in parts]
        assert not any(not a and not b for a, b in itertools.pairwise(sizes))
        history.pop()
        history.append({"role": "assistant", "content": "Done."})


async def test_a_longer_history_encodes_only_its_new_messages() -> None:
    encoder = RequestEncoder()
    history = conversation(50)
    reminder: Message = {"role": "user", "content": "<context>now</context>"}
    first = await encode(encoder, [*history, reminder])
    assert encoder.encoded == len(history) + 1

    before = encoder.encoded
    history.append({"role": "assistant", "content": "Done."})
    reminder = {"role": "user", "content": "<context>later</context>"}
    second = await encode(encoder, [*history, reminder])
    assert encoder.encoded == before + 2  # the answer and the new reminder
    assert second.startswith(first[: -len(reference(reminder)) - 1])  # the prefix is kept


async def test_a_rewritten_message_is_a_new_dict_and_is_encoded_anew() -> None:
    encoder = RequestEncoder()
    history = conversation(3)
    await encode(encoder, history)
    stubbed = list(history)
    stubbed[3] = {**history[3], "content": "[trimmed]"}
    before = encoder.encoded
    assert await encode(encoder, stubbed) == reference(stubbed)
    assert encoder.encoded == before + 1


async def test_a_message_mutated_in_place_is_not_sent_stale() -> None:
    encoder = RequestEncoder()
    history = conversation(2)
    await encode(encoder, history)
    history[3]["content"] = "changed behind the cache's back"
    assert await encode(encoder, history) == reference(history)


async def test_messages_that_left_the_request_leave_the_cache() -> None:
    encoder = RequestEncoder()
    history = conversation(10)
    await encode(encoder, history)
    compacted = [history[0], {"role": "user", "content": "note"}, *history[-3:]]
    await encode(encoder, compacted)
    await encode(encoder, history)
    assert encoder.encoded == len(history) + 1 + (len(history) - 4)


async def test_sessions_side_by_side_keep_their_messages_encoded() -> None:
    encoder = RequestEncoder()
    one, two = conversation(5), conversation(5)
    for _ in range(3):
        await encode(encoder, one)
        await encode(encoder, two)
    assert encoder.encoded == len(one) + len(two)


async def test_a_lone_surrogate_is_sent_repaired_instead_of_failing_the_request() -> None:
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "bad \ud83d half"}]
    sent = await encode(RequestEncoder(), history)
    assert json.loads(sent)[1]["content"] == "bad \ufffd half"
    assert history[1]["content"] == "bad \ud83d half"  # what is stored is not touched here


async def test_a_huge_message_is_encoded_in_slices_to_the_same_bytes() -> None:
    text = ('line with "quotes", a tab\t, é and 😀\n' * 40_000) + "end"
    history = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": text},
        {"role": "tool", "tool_call_id": "x", "content": "ascii " * 100_000},
    ]
    rests: list[int] = []
    pacer = Pacer(budget=0.0)  # every slice is a slice: count how often the loop may run
    original = pacer.rest

    async def counted() -> None:
        rests.append(1)
        await original()

    pacer.rest = counted  # type: ignore[method-assign]
    assert await encode(RequestEncoder(), history, pacer) == reference(history)
    assert len(rests) >= len(text) // SLICE_CHARS


async def test_a_stub_rebuilt_with_the_same_text_is_not_encoded_again() -> None:
    encoder = RequestEncoder()
    history = conversation(20)

    def stubbed() -> list[Message]:  # what the layers send: a new dict, new text, each time
        return [
            {**m, "content": "".join(["[trim", "med]"])} if m["role"] == "tool" else m
            for m in history
        ]

    await encode(encoder, history)
    first = await encode(encoder, stubbed())  # the request after the layers' decision
    before = encoder.encoded
    assert await encode(encoder, stubbed()) == first  # and the ones after it
    assert encoder.encoded == before


async def test_a_request_that_extends_the_last_one_encodes_only_what_is_new() -> None:
    encoder = RequestEncoder()
    history = conversation(30)
    for n in range(5):
        reminder: Message = {"role": "user", "content": f"<context>{n}</context>"}
        before = encoder.encoded
        assert await encode(encoder, [*history, reminder]) == reference([*history, reminder])
        if n:
            assert encoder.encoded == before + 2  # the answer stored since, and the reminder
        history.append({"role": "assistant", "content": f"answer {n}"})


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 40)),
        st.tuples(st.just("undo"), st.integers(1, 60)),
        st.tuples(st.just("rewrite"), st.integers(0, 200)),
        st.tuples(st.just("again"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


@given(operations)
def test_a_session_of_any_shape_sends_the_bytes_json_dumps_gives(steps: list[Any]) -> None:
    """Calls that add messages (past the point where the encoder joins its run of bytes), undo
    turns, rewrite a message in the middle (a new stub), or send the same request again: every
    request is json.dumps' bytes."""
    encoder = RequestEncoder()
    history: list[Message] = [frozen({"role": "system", "content": "s"})]
    count = 0

    async def send() -> None:
        nonlocal count
        count += 1
        request = [*history, {"role": "user", "content": f"<context>{count}</context>"}]
        assert await encode(encoder, request) == reference(request)

    async def run() -> None:
        for kind, amount in steps:
            if kind == "append":
                for _ in range(amount):
                    history.append(frozen({"role": "tool", "content": f"result {len(history)}"}))
            elif kind == "undo":
                del history[max(1, len(history) - amount) :]
            elif kind == "rewrite" and len(history) > 1:
                index = 1 + amount % (len(history) - 1)
                history[index] = frozen({**history[index], "content": "[trimmed]"})
            await send()
            if kind == "again":
                await send()

    asyncio.run(run())
