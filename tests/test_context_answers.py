"""A reply of any size leaves its session usable (`lsp_agent/context/answers.py`): capped in the
history, stubbed at a strip, whole in the transcript; the story over stdio is in
test_model_faults.py."""

from __future__ import annotations

import json

from lsp_agent.context.answers import CAP_CHARS, STUB_CHARS, capped, stubbed
from lsp_agent.context.view import ContextState, build_request
from lsp_agent.messages import frozen


def test_an_answer_over_the_cap_keeps_its_head_and_tail_and_says_what_was_cut() -> None:
    text = "".join(f"line {i}\n" for i in range(100_000))
    message = frozen({"role": "assistant", "content": text})

    kept = capped(message)

    content = kept["content"]
    assert len(content) < CAP_CHARS + 300
    assert content.startswith("line 0\n")
    assert content.endswith("line 99999\n")
    assert f"of {len(text):,} characters of this answer cut here" in content
    assert message["content"] == text  # the stored message itself is not changed


def test_messages_within_the_cap_are_kept_as_the_same_object() -> None:
    for message in (
        frozen({"role": "assistant", "content": "x" * CAP_CHARS}),
        frozen({"role": "user", "content": "y" * (CAP_CHARS * 3)}),
        frozen({"role": "tool", "tool_call_id": "1", "content": "z" * (CAP_CHARS * 3)}),
    ):
        assert capped(message) is message


def test_a_tool_call_with_megabytes_of_arguments_keeps_a_valid_call() -> None:
    big = json.dumps({"path": "a.py", "content": "x" * 1_000_000})
    small = json.dumps({"path": "b.py"})
    message = frozen(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": big},
                },
                {
                    "id": "2",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": small},
                },
            ],
        }
    )

    first, second = capped(message)["tool_calls"]

    note = json.loads(first["function"]["arguments"])  # still JSON, as a request needs
    assert "were cut to fit the context window" in note["note"]
    assert (first["id"], first["function"]["name"]) == ("1", "write_file")
    assert second == message["tool_calls"][1]


def test_a_strip_shortens_old_long_answers_and_leaves_short_ones() -> None:
    long = frozen({"role": "assistant", "content": "a" * (STUB_CHARS * 5)})
    short = frozen({"role": "assistant", "content": "fine"})
    assert stubbed(short) is short
    assert len(stubbed(long)["content"]) < STUB_CHARS + 100
    history = [
        frozen({"role": "system", "content": "s"}),
        frozen({"role": "user", "content": "first"}),
        long,
        frozen({"role": "user", "content": "next"}),
        long,
        frozen({"role": "user", "content": "last"}),
    ]

    sent = build_request(history, ContextState(strip_before=3))

    assert "answer trimmed" in sent[2]["content"]
    assert sent[4] is long  # newer than the strip: sent as stored
