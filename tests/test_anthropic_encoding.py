"""The Anthropic request body, each stored message converted once: byte for byte what converting
the whole history (`to_anthropic`) and encoding it gives, for sessions of any shape."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_agent.messages import Message, frozen
from lsp_agent.model.anthropic import AnthropicEncoder, to_anthropic
from lsp_agent.model.encoding import JOIN_AFTER, json_parts

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


async def body(encoder: AnthropicEncoder, request: list[Message]) -> bytes:
    """The body as the provider sends it (its members in its order), joined."""
    members: list[tuple[str, bytes | list[bytes]]] = [
        ("model", b'"m"'),
        ("max_tokens", b"8"),
        ("stream", b"true"),
        *await encoder.members(request),
    ]
    return b"".join(json_parts(members))


def reference(request: list[Message]) -> bytes:
    whole = {"model": "m", "max_tokens": 8, "stream": True, **to_anthropic(request, [])}
    return json.dumps(whole, ensure_ascii=False, separators=(",", ":")).encode()


def made(kind: str, n: int) -> Message:
    """A message of each shape the conversion treats apart (`n` makes it unique)."""
    call = {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    shapes: dict[str, Message] = {
        "prompt": {"role": "user", "content": f"question {n} é 😀"},
        "blank": {"role": "user", "content": "  "},  # no block at all
        "image": {
            "role": "user",
            "content": [
                {"type": "text", "text": f"see {n}"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        "text": {"role": "assistant", "content": f"answer {n}"},
        "call": {"role": "assistant", "content": "", "tool_calls": [call]},
        "both": {"role": "assistant", "content": f"reading {n}", "tool_calls": [call]},
        "result": {"role": "tool", "tool_call_id": f"c{n}", "content": f'line {n}\n\t"q"\\'},
        "empty": {"role": "tool", "tool_call_id": f"c{n}", "content": ""},
        "system": {"role": "system", "content": f"rule {n}"},
        "developer": {"role": "developer", "content": f"note {n}"},
    }
    return frozen(shapes[kind])


KINDS = [
    "prompt",
    "blank",
    "image",
    "text",
    "call",
    "both",
    "result",
    "empty",
    "system",
    "developer",
]
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.sampled_from(KINDS), min_size=1, max_size=45)),
        st.tuples(st.just("undo"), st.integers(1, 60)),
        st.tuples(st.just("rewrite"), st.integers(0, 400)),
        st.tuples(st.just("again"), st.just([])),
        st.tuples(st.just("bare"), st.just([])),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(KINDS), max_size=3), operations)
def test_a_session_of_any_shape_sends_the_bytes_of_the_whole_conversion(
    start: list[str], steps: list[Any]
) -> None:
    """Calls that add messages of every shape (past the point where groups are joined), undo
    turns, rewrite a message in the middle (to a stub, or to nothing to send), send the same
    request again, or send one without a reminder: every body is the whole history converted and
    encoded."""
    encoder = AnthropicEncoder()
    history: list[Message] = [made(kind, n) for n, kind in enumerate(start)]
    count = 0

    async def send(reminder: bool = True) -> None:
        nonlocal count
        count += 1
        request = [*history]
        if reminder:
            request.append({"role": "user", "content": f"<context>{count}</context>"})
        if request:
            assert await body(encoder, request) == reference(request)

    async def run() -> None:
        for kind, argument in steps:
            if kind == "append":
                history.extend(made(shape, len(history)) for shape in argument)
            elif kind == "undo":
                del history[max(1, len(history) - argument) :]
            elif kind == "rewrite" and len(history) > 1:
                # A stub, or a text that leaves no block (what follows may change places).
                index = 1 + argument % (len(history) - 1)
                text = "[trimmed]" if argument % 2 else " "
                history[index] = frozen({**history[index], "content": text})
            await send(reminder=kind != "bare")
            if kind == "again":
                await send()

    asyncio.run(run())


def session(turns: int) -> list[Message]:
    history = [made("system", 0)]
    for n in range(turns):
        history += [made("prompt", n), made("call", n), made("result", n), made("text", n)]
    return history


async def test_a_longer_history_converts_only_its_new_messages() -> None:
    encoder = AnthropicEncoder()
    history = session(3 * JOIN_AFTER)
    first = [*history, {"role": "user", "content": "<context>1</context>"}]
    assert await body(encoder, first) == reference(first)
    assert encoder.converted == len(first)

    for call in range(2, 6):
        before = encoder.converted
        history += [made("call", 1000 + call), made("result", 1000 + call)]
        request = [*history, {"role": "user", "content": f"<context>{call}</context>"}]
        assert await body(encoder, request) == reference(request)
        assert encoder.converted == before + 3  # the call, its result, the new reminder


async def test_a_rewritten_history_converts_only_what_was_rewritten() -> None:
    encoder = AnthropicEncoder()
    history = session(20)
    request = [*history, {"role": "user", "content": "<context>1</context>"}]
    await body(encoder, request)
    before = encoder.converted
    stubbed = [
        frozen({**message, "content": "[trimmed]"}) if message["role"] == "tool" else message
        for message in history
    ]
    request = [*stubbed, {"role": "user", "content": "<context>2</context>"}]
    assert await body(encoder, request) == reference(request)
    assert encoder.converted == before + 20 + 1  # the 20 stubs and the reminder


async def test_a_message_mutated_in_place_is_not_sent_stale() -> None:
    encoder = AnthropicEncoder()
    history: list[Message] = [{"role": "user", "content": "first"}, {"role": "assistant"}]
    history[1]["content"] = "before"
    request = [*history, {"role": "user", "content": "<context/>"}]
    await body(encoder, request)
    history[1]["content"] = "after"  # a plain dict changed in place
    request = [*history, {"role": "user", "content": "<context/>"}]
    assert await body(encoder, request) == reference(request)


async def test_the_history_s_blocks_carry_no_breakpoint_once_they_are_not_last() -> None:
    """The breakpoint moves with the end of the history: a block marked in one request is sent
    unmarked in the next, as converting the whole history gives."""
    encoder = AnthropicEncoder()
    history = session(2)
    first = [*history, {"role": "user", "content": "<context>1</context>"}]
    sent = await body(encoder, first)
    assert sent.count(b'"cache_control"') == 3  # the system prompt and the last two blocks
    history.append(made("prompt", 99))
    second = [*history, {"role": "user", "content": "<context>2</context>"}]
    assert await body(encoder, second) == reference(second)


async def test_the_breakpoints_are_found_when_the_last_message_sends_nothing() -> None:
    """Many one-block messages of alternating roles (so the groups are joined), then the same
    history sent again, ending with a message that sends no block: the breakpoints fall on the
    history's last two blocks, in its last two groups, which are never joined."""
    encoder = AnthropicEncoder()
    history = [made("prompt" if n % 2 == 0 else "text", n) for n in range(4 * JOIN_AFTER)]
    for call in range(3):
        request = [*history, frozen({"role": "user", "content": " " * (call + 1)})]
        assert await body(encoder, request) == reference(request)


async def test_a_note_joins_the_system_prompt_once_nothing_precedes_it() -> None:
    """A developer note after a prompt is the user's text; once the prompt is rewritten to
    nothing, the note is the first message sent and joins the system prompt."""
    encoder = AnthropicEncoder()
    history = [made("system", 0), made("prompt", 1), made("developer", 2), made("text", 3)]
    request = [*history, {"role": "user", "content": "<context>1</context>"}]
    assert await body(encoder, request) == reference(request)
    history[1] = frozen({**history[1], "content": " "})
    request = [*history, {"role": "user", "content": "<context>2</context>"}]
    assert await body(encoder, request) == reference(request)
    assert b'"system":[{"type":"text","text":"rule 0"},{"type":"text","text":"note 2"' in (
        await body(encoder, request)
    )
