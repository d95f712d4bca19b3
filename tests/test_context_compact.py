"""Compaction: a second model call writes the hand-off note; a failure loses nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lsp_agent.config import Settings
from lsp_agent.context.compact import (
    COMPACT_SYSTEM_PROMPT,
    NOTE_SECTIONS,
    Compact,
    CompactionError,
)
from lsp_agent.context.layers import end_of_turn
from lsp_agent.context.tokens import Message, TokenMeter
from lsp_agent.context.view import ContextState, View, build_request, restore_state
from lsp_agent.messages import Reply, Usage, estimate_tokens
from lsp_agent.model import ProviderError, make_provider
from lsp_agent.tools.belt import TOOL_SCHEMAS
from tests.fake_model import ScriptedAnthropic, ScriptedModel, error, reply
from tests.test_context_history import REMINDER, NoteWriter, check_request

NOTE = (
    '## Goal\nThe user asked: "make the parser accept trailing commas".\n'
    "## What happened\nRead parser.py; the tokenizer drops the last comma.\n"
    "## Files\nsrc/parser.py: not changed yet.\n"
    "## State\nThe failing test is test_trailing_comma.\n"
    "## Next\nEdit Parser.items() to allow a comma before `]`."
)


class Scripted:
    """A provider that answers the compaction calls from a script: texts or errors."""

    name = "openai"
    model = "scripted"
    base_url = "memory://"

    def __init__(self, *answers: str | ProviderError) -> None:
        self.answers = list(answers)
        self.requests: list[list[dict[str, Any]]] = []
        self.tools: list[list[dict[str, Any]]] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: Any
    ) -> Reply:
        self.requests.append(messages)
        self.tools.append(tools)
        answer = self.answers.pop(0)
        if isinstance(answer, ProviderError):
            raise answer
        return Reply(answer, (), Usage(0, 0, None, True), "stop")

    async def list_models(self) -> list[str]:
        return [self.model]

    async def aclose(self) -> None:
        pass


def conversation(turns: int, result_chars: int = 6000) -> list[Message]:
    """A session of `turns` prompts, each answered after two tool calls; the last turn is done."""
    history: list[Message] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Make the parser accept trailing commas."},
    ]
    calls = 0
    for turn in range(turns):
        if turn:
            history.append({"role": "user", "content": f"Prompt {turn}: keep going."})
        for _ in range(2):
            calls += 1
            call = {
                "id": f"call_{calls}",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "parser.py"})},
            }
            history.append({"role": "assistant", "content": "", "tool_calls": [call]})
            history.append(
                {"role": "tool", "tool_call_id": f"call_{calls}", "content": "p" * result_chars}
            )
        history.append({"role": "assistant", "content": f"Turn {turn} done."})
    return history


def tight(history: list[Message], share: float = 1.2) -> Settings:
    """Settings whose window the history overflows even once its tool results are dropped."""
    dialogue = [m for m in history if m["role"] != "tool"]
    return Settings(context_window=int(TokenMeter().estimate(dialogue) / share))


async def test_the_note_replaces_the_middle_and_the_request_is_cut_back_to_compact_to() -> None:
    history = conversation(12, result_chars=200)
    for message in history:
        if message["role"] == "assistant" and not message.get("tool_calls"):
            message["content"] += (
                " Reasoning. " * 80
            )  # long answers: dropping results is not enough
    settings = tight(history)
    writer = Scripted(NOTE)
    compacting: list[str] = []

    state, events = await end_of_turn(
        history, ContextState(), settings, writer, TokenMeter(), progress=compacting.append
    )

    assert [event.strategy for event in events][-1] == "compact"
    assert compacting == ["compacting"]
    assert state.note == NOTE
    request = check_request(history, state)
    assert request[:2] == history[:2], "the system prompt and the user's first words"
    assert request[2]["role"] == "user"
    assert NOTE in request[2]["content"]
    assert request[-2] == history[-1]
    assert events[-1].after <= settings.context_window * settings.compact_to
    assert TokenMeter().estimate(request[:-1]) == events[-1].after


async def test_the_compaction_request_asks_for_the_five_sections_with_the_users_words() -> None:
    history = conversation(3)
    history.insert(2, {"role": "user", "content": "Also: don't touch the lexer."})
    history.insert(3, {"role": "assistant", "content": "Understood."})
    writer = Scripted(NOTE)
    view = View(history, ContextState(), TokenMeter())

    await Compact(writer, cut_to=100, window=100_000).apply(view, 100)

    (system, user) = writer.requests[0]
    assert system == {"role": "system", "content": COMPACT_SYSTEM_PROMPT}
    for section in NOTE_SECTIONS:
        assert f"## {section}\n" in COMPACT_SYSTEM_PROMPT
    assert "Make the parser accept trailing commas." in user["content"]
    assert "Also: don't touch the lexer." in user["content"]
    assert '→ read_file({"path": "parser.py"})' in user["content"]
    assert "### Result of read_file\n" + "p" * 6000 in user["content"]
    assert writer.tools == [[]], "no tools: the note is text"


async def test_an_empty_note_fails_the_turn_and_loses_nothing() -> None:
    history = conversation(6)
    stored = json.dumps(history)
    state = ContextState(strip_before=5, decided_at=20)
    meter = TokenMeter()

    with pytest.raises(CompactionError) as raised:
        await end_of_turn(history, state, tight(history), Scripted("  \n"), meter)

    assert "empty hand-off note" in raised.value.message
    assert "nothing was removed" in raised.value.message
    assert isinstance(raised.value, ProviderError), "the loop's provider-failure path handles it"
    assert json.dumps(history) == stored
    assert meter.view_bytes == 0, "the meter was not moved either"


async def test_a_compaction_request_too_long_for_the_window_leaves_out_the_oldest_first() -> None:
    history = conversation(10)
    writer = Scripted(NOTE)
    view = View(history, ContextState(), TokenMeter())
    compact = Compact(writer, cut_to=1000, window=12_000, output_reserve=2000)

    await compact.apply(view, 1000)

    text = writer.requests[0][1]["content"]
    assert estimate_tokens(COMPACT_SYSTEM_PROMPT + text) <= 12_000 - 2000
    assert "earlier messages left out so that this request fits]" in text
    assert "Make the parser accept trailing commas." in text, "the user's words are kept"
    assert all(f"Prompt {n}: keep going." in text for n in range(1, 10))
    assert text.index("left out") < text.index("### The agent\nTurn 9 done."), "newest kept"


async def test_when_the_endpoint_says_too_long_half_as_much_is_sent() -> None:
    too_long = ProviderError("the request is longer than the model's context window (…)", 400)
    writer = Scripted(too_long, NOTE)
    view = View(conversation(10), ContextState(), TokenMeter())

    after = await Compact(writer, cut_to=1000, window=60_000).apply(view, 1000)

    first, second = (len(request[1]["content"]) for request in writer.requests)
    assert second < first * 0.6
    assert after is not None
    assert after.state.note == NOTE


async def test_other_endpoint_failures_are_not_retried_and_say_what_happened() -> None:
    writer = Scripted(ProviderError("the endpoint http://x/v1 is unreachable", None), NOTE)
    view = View(conversation(4), ContextState(), TokenMeter())

    with pytest.raises(CompactionError) as raised:
        await Compact(writer, cut_to=1000, window=60_000).apply(view, 1000)

    assert raised.value.message.startswith("compacting the context failed: the endpoint")
    assert len(writer.requests) == 1


async def test_a_second_compaction_builds_on_the_first_note() -> None:
    history = conversation(8)
    settings = tight(history, share=1.5)
    first, _ = await end_of_turn(history, ContextState(), settings, Scripted(NOTE), TokenMeter())
    assert first.note == NOTE
    history += conversation(3)[2:]
    writer = Scripted("## Goal\nsecond note\n## What happened\n## Files\n## State\n## Next\n")

    second, events = await end_of_turn(history, first, settings, writer, TokenMeter())

    assert "compact" in [event.strategy for event in events]
    assert "### Earlier hand-off note\n" + NOTE in writer.requests[0][1]["content"]
    assert second.note is not None
    assert second.note.startswith("## Goal\nsecond note")
    assert second.note_from >= first.note_from
    check_request(history, second)


async def test_a_very_long_note_is_cut_to_leave_room_for_the_recent_messages() -> None:
    view = View(conversation(6), ContextState(), TokenMeter())

    after = await Compact(Scripted("n" * 50_000), cut_to=4000, window=60_000).apply(view, 4000)

    assert after is not None
    assert after.state.note is not None
    assert len(after.state.note) <= 4000 * 3.5 / 2 + 100
    assert after.state.note.endswith("[note cut to fit the context window]")


async def test_a_history_with_nothing_to_cut_is_not_compacted() -> None:
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "x" * 50_000},
        {"role": "assistant", "content": "ok"},
    ]
    writer = Scripted(NOTE)

    after = await Compact(writer, cut_to=10, window=1000).apply(
        View(history, ContextState(), TokenMeter()), 10
    )

    assert after is None
    assert writer.requests == [], "no model call for nothing"


async def test_compaction_through_a_real_endpoint_and_the_compacted_request_is_accepted() -> None:
    history = conversation(10, result_chars=200)
    for message in history:
        if message["role"] == "assistant" and not message.get("tool_calls"):
            message["content"] += " Reasoning. " * 80
    settings = tight(history)
    with ScriptedModel([reply(NOTE), reply("Carrying on.")]) as model:
        provider = make_provider("openai", model.base_url, "test-model", None, base_delay=0.01)
        try:
            state, events = await end_of_turn(
                history, ContextState(), settings, provider, TokenMeter()
            )
            request = build_request(history, state, REMINDER)
            answer = await provider.complete(request, TOOL_SCHEMAS, lambda _: None)
        finally:
            await provider.aclose()

    assert events[-1].strategy == "compact"
    assert state.note == NOTE
    assert answer.text == "Carrying on."
    assert model.rejections == []
    compaction, sent = model.requests
    assert "tools" not in compaction
    assert sent["messages"][2]["content"].startswith("<handoff_note>")
    record = json.loads(json.dumps(events[-1].record()))
    assert record["context"]["note"] == NOTE, "the transcript keeps the note"
    assert restore_state([record], history) == (state, None)


async def test_the_compacted_request_is_accepted_by_an_anthropic_endpoint() -> None:
    history = conversation(10, result_chars=200)
    state, _ = await end_of_turn(
        history, ContextState(), tight(history, share=1.5), NoteWriter(), TokenMeter()
    )
    assert state.note is not None
    with ScriptedAnthropic([reply("ok")]) as endpoint:
        provider = make_provider("anthropic", endpoint.base_url, "test-model", "k" * 20)
        try:
            request = build_request(history, state, REMINDER)
            answer = await provider.complete(request, TOOL_SCHEMAS, lambda _: None)
        finally:
            await provider.aclose()

    assert answer.text == "ok"
    assert endpoint.rejections == []


async def test_an_endpoint_error_during_compaction_keeps_its_status() -> None:
    with ScriptedModel([error(503), error(503)]) as model:
        provider = make_provider(
            "openai", model.base_url, "test-model", None, retries=1, base_delay=0.01
        )
        try:
            with pytest.raises(CompactionError) as raised:
                await Compact(provider, cut_to=100, window=50_000).apply(
                    View(conversation(4), ContextState(), TokenMeter()), 100
                )
        finally:
            await provider.aclose()

    assert raised.value.status == 503
