"""The context layers over random histories: what is sent stays valid, lean, and cache-friendly.

Histories are random sequences of user prompts, assistant text, assistant tool calls (one to
three at a time) and their results, of random sizes. Requests are checked with the scripted
endpoints' own validation (OpenAI's pairing rules, and Anthropic's after conversion), so "valid"
means what a picky real server accepts.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lsp_agent.config import Settings
from lsp_agent.context.compact import Compact
from lsp_agent.context.layers import (
    STRIP_HEADROOM,
    ContextEvent,
    Drop,
    Strip,
    before_call,
    end_of_turn,
)
from lsp_agent.context.tokens import Message, TokenMeter, request_bytes
from lsp_agent.context.view import (
    ContextState,
    View,
    build_request,
    dropped,
    head_end,
    protected_start,
    restore_state,
    stub,
)
from lsp_agent.messages import Reply, Usage
from lsp_agent.model.anthropic import to_anthropic
from lsp_agent.tools.belt import TOOL_SCHEMAS
from tests.fake_model import ScriptedAnthropic, ScriptedModel, _Rejection

REMINDER: Message = {"role": "user", "content": "<context>\ntime: now\n</context>"}
NOTE = "## Goal\nThe user said: 'make it work'.\n## What happened\n## Files\n## State\n## Next\n"

PROPERTY = settings(
    max_examples=150,
    deadline=None,  # tests never fail on timing
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class NoteWriter:
    """A provider that answers every compaction with a note of a fixed size."""

    name = "openai"
    model = "note-writer"
    base_url = "memory://"

    def __init__(self, size: int = 600) -> None:
        self.size = size
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: Any
    ) -> Reply:
        self.requests.append(messages)
        text = (NOTE * (self.size // len(NOTE) + 1))[: max(self.size, 1)]
        return Reply(text, (), Usage(0, 0, None, True), "stop")

    async def list_models(self) -> list[str]:
        return [self.model]

    async def aclose(self) -> None:
        pass


def _validator(kind: type[Any]) -> Any:
    validator = object.__new__(kind)
    validator.models = ["test-model"]
    validator.rejections = []
    return validator


OPENAI = _validator(ScriptedModel)
ANTHROPIC = _validator(ScriptedAnthropic)


def assert_valid(request: list[Message]) -> None:
    """The request passes the scripted endpoints' checks, in both dialects."""
    try:
        OPENAI._validate({"model": "test-model", "messages": request, "tools": TOOL_SCHEMAS})
        body = {"model": "test-model", "max_tokens": 1, **to_anthropic(request, TOOL_SCHEMAS)}
        ANTHROPIC._validate(body)
    except _Rejection as rejection:
        pytest.fail(f"the provider would refuse this request: {rejection.body}")


def filler(size: int, char: str, tag: str) -> str:
    text = tag + " " + char * size
    return text[: max(size, len(tag))]


@st.composite
def histories(draw: st.DrawFn, max_steps: int = 40) -> list[Message]:
    """A valid stored history: system prompt, first user message, then random steps."""
    char = draw(st.sampled_from(["a", "é", "字"]))
    sizes = st.one_of(st.integers(1, 300), st.integers(300, 20_000))
    history: list[Message] = [
        {"role": "system", "content": filler(draw(st.integers(10, 3000)), char, "system")},
        {"role": "user", "content": filler(draw(sizes), char, "first")},
    ]
    calls = 0
    steps = st.lists(st.sampled_from(["user", "text", "calls", "calls"]), max_size=max_steps)
    for step in draw(steps):
        if step == "user":
            history.append({"role": "user", "content": filler(draw(sizes), char, "prompt")})
        elif step == "text":
            history.append({"role": "assistant", "content": filler(draw(sizes), char, "answer")})
        else:
            ids = [f"call_{calls + n}" for n in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            written = filler(draw(sizes), char, "def f():") if draw(st.booleans()) else ""
            arguments = json.dumps({"path": "a.py", "content": written}, ensure_ascii=False)
            history.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from(["", "Let me look."])),
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "write_file", "arguments": arguments},
                        }
                        for call_id in ids
                    ],
                }
            )
            for call_id in ids:
                content = filler(draw(sizes), char, "<untrusted>result")
                if draw(st.booleans()):
                    content = f'<untrusted source="a.py">{content}</untrusted>'
                history.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return history


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def window_for(history: Sequence[Message], share: float) -> int:
    """A context window such that the history fills `share` of it."""
    return max(int(TokenMeter().estimate(history) / share), 64)


def first_user(history: Sequence[Message]) -> Message:
    return next(message for message in history if message["role"] == "user")


def check_request(history: Sequence[Message], state: ContextState) -> list[Message]:
    """The invariants every request must keep, whatever the state."""
    request = build_request(history, state, REMINDER)
    assert_valid(request)
    assert request[0] is history[0], "the system prompt survives"
    assert first_user(history) in request, "the first user message survives"
    assert request[-1] is REMINDER
    return request


@PROPERTY
@given(history=histories(), share=st.floats(0.4, 4.0), note=st.integers(1, 3000))
def test_a_decision_keeps_the_request_valid_and_the_head_and_the_tail(
    history: list[Message], share: float, note: int
) -> None:
    settings_ = Settings(context_window=window_for(history, share))
    state, events = run(
        end_of_turn(history, ContextState(), settings_, NoteWriter(note), TokenMeter())
    )

    request = check_request(history, state)
    tail = len(history) - protected_start(history)
    assert request[-1 - tail : -1] == history[-tail:], "the last messages are never rewritten"
    assert all(isinstance(event, ContextEvent) for event in events)
    assert [event.strategy for event in events] == sorted(
        (event.strategy for event in events), key=["strip", "drop", "compact"].index
    ), "cheapest layer first"


def _call(n: int) -> Message:
    function = {"name": "write_file", "arguments": '{"path": "a.py", "content": ""}'}
    call = {"id": f"call_{n}", "type": "function", "function": function}
    return {"role": "assistant", "content": "Let me look.", "tool_calls": [call]}


SAVES_A_BYTE: list[Message] = [
    {"role": "system", "content": "system aaa"},
    {"role": "user", "content": "first"},
    {"role": "user", "content": "prompt " + "a" * 127},
    _call(0),
    {"role": "tool", "tool_call_id": "call_0", "content": "<untrusted>result " + "a" * 130},
    _call(1),
    {"role": "tool", "tool_call_id": "call_1", "content": "<untrusted>result " + "a" * 982},
    {"role": "user", "content": "prompt"},
    {"role": "user", "content": "prompt"},
]
"""Found by the property below: a hand-off note that made the request a few bytes shorter and
not one token, which compaction applied (a model call and a broken cache for nothing)."""


@PROPERTY
@given(history=histories(), target_share=st.floats(0.05, 1.2), note=st.integers(1, 3000))
@example(history=SAVES_A_BYTE, target_share=0.5, note=567)
def test_each_layer_reaches_its_target_unless_only_untouchable_messages_remain(
    history: list[Message], target_share: float, note: int
) -> None:
    meter = TokenMeter()
    view = View(history, ContextState(), meter)
    target = int(view.tokens * target_share)
    strip = Strip(stub_chars=300)
    drop = Drop()
    compact = Compact(NoteWriter(note), cut_to=target, window=max(view.tokens * 2, 4096))

    stripped = run(strip.apply(view, target))
    if view.tokens > target and (stripped is None or stripped.tokens > target):
        current = stripped or view
        assert all(
            current.sent(i) == _stubbed(history[i], current.state.stub_chars)
            for i in _tool_results(history, view.start, view.protected)
        ), "over target only when every old tool result is already a stub"
    base = stripped or view
    after_drop = run(drop.apply(base, target))
    if base.tokens > target and (after_drop is None or after_drop.tokens > target):
        current = after_drop or base
        assert all(
            current.sent(i)["content"] == dropped(history[i]["content"])
            for i in _tool_results(history, current.start, current.protected)
        ), "over target only when every old tool result is dropped"
    base = after_drop or base
    compacted = run(compact.apply(base, target))
    if compacted is not None:
        assert compacted.tokens < base.tokens
        latest = max(
            i
            for i in range(base.start, protected_start(history) + 1)
            if history[i]["role"] != "tool"
        )
        assert compacted.tokens <= target or compacted.state.note_from == latest
        check_request(history, compacted.state)
    for layer_view in (stripped, after_drop):
        if layer_view is not None:
            check_request(history, layer_view.state)


@PROPERTY
@given(history=histories(), depth=st.floats(0.0, 1.0))
def test_drop_takes_the_oldest_results_and_no_more_than_it_needs(
    history: list[Message], depth: float
) -> None:
    meter = TokenMeter()
    view = View(history, ContextState(), meter)
    everything = View(history, ContextState(drop_before=view.protected), meter)
    target = int(everything.tokens + (view.tokens - everything.tokens) * depth)

    after = run(Drop().apply(view, target))

    if view.tokens <= target:
        assert after is None
        return
    assert after is not None
    assert after.tokens <= target
    droppable = [
        i
        for i in _tool_results(history, 0, len(history))
        if dropped(history[i]["content"]) is not history[i]["content"]
    ]
    sent = [after.sent(i) is not history[i] for i in droppable]
    assert sent == sorted(sent, reverse=True), "oldest first"
    last = max(i for i in droppable if after.sent(i) is not history[i])
    undone = dataclasses.replace(after.state, drop_before=last)
    assert View(history, undone, meter).tokens > target, "no more than needed"


@PROPERTY
@given(history=histories(), share=st.floats(0.3, 3.0))
def test_build_request_is_a_pure_function_of_history_and_state(
    history: list[Message], share: float
) -> None:
    settings_ = Settings(context_window=window_for(history, share))
    state, _ = run(end_of_turn(history, ContextState(), settings_, NoteWriter(), TokenMeter()))
    stored = copy.deepcopy(history)

    first = build_request(history, state, REMINDER)
    again = build_request(copy.deepcopy(history), copy.deepcopy(state), REMINDER)

    assert first == again
    assert json.dumps(first) == json.dumps(again)
    assert history == stored, "building a request never changes the stored history"


@PROPERTY
@given(
    history=histories(max_steps=60),
    cuts=st.lists(st.integers(3, 200), min_size=1, max_size=6),
    share=st.floats(0.2, 1.5),
)
def test_between_decisions_each_request_begins_with_the_previous_one(
    history: list[Message], cuts: list[int], share: float
) -> None:
    """A simulated session: the history grows; decisions happen only at turn ends."""
    settings_ = Settings(context_window=window_for(history, share))
    turn_ends = sorted({min(cut, len(history)) for cut in cuts} | {len(history)})
    meter, state, start = TokenMeter(), ContextState(), 2
    for end in turn_ends:
        previous: str | None = None
        for length in range(start, end + 1):
            if history[length - 1]["role"] == "assistant" and history[length - 1].get("tool_calls"):
                continue  # a request is never sent with calls still unanswered
            request = build_request(history[:length], state)
            text = json.dumps(request)
            if previous is not None:
                assert text.startswith(previous[:-1]), "the stored prefix changed mid-turn"
            previous = text
        prefix = history[:end]
        if unanswered(prefix):
            continue
        state, _ = run(end_of_turn(prefix, state, settings_, NoteWriter(), meter))
        check_request(prefix, state)
        start = end + 1


@PROPERTY
@given(history=histories(), share=st.floats(0.2, 3.0))
def test_the_state_comes_back_from_the_transcript_records(
    history: list[Message], share: float
) -> None:
    settings_ = Settings(context_window=window_for(history, share))
    state, events = run(end_of_turn(history, ContextState(), settings_, NoteWriter(), TokenMeter()))
    records = [json.loads(json.dumps(event.record())) for event in events]

    restored, problem = restore_state(records, history)

    assert problem is None
    assert build_request(history, restored) == build_request(history, state)


# Stories, one layer at a time.


def session(results: int, size: int = 8000) -> list[Message]:
    """A finished turn that read `results` files of `size` chars."""
    history: list[Message] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the parser, please."},
    ]
    for n in range(results):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{n}.py"})},
        }
        history.append({"role": "assistant", "content": "", "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "x" * size})
    history.append({"role": "assistant", "content": "Fixed."})
    return history


def unanswered(history: Sequence[Message]) -> set[str]:
    """Tool calls of the history's last call message that have no result yet."""
    pending: set[str] = set()
    for message in history:
        if message["role"] == "assistant":
            pending = {call["id"] for call in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            pending.discard(message["tool_call_id"])
    return pending


def _tool_results(history: Sequence[Message], start: int, end: int) -> list[int]:
    return [i for i in range(start, end) if history[i]["role"] == "tool"]


def _stubbed(message: Message, keep: int) -> Message:
    text = stub(message["content"], keep)
    return message if text is message["content"] else {**message, "content": text}


async def test_below_strip_at_nothing_is_rewritten() -> None:
    history = session(10)
    window = int(TokenMeter().estimate(history) / 0.4)

    state, events = await end_of_turn(
        history, ContextState(), Settings(context_window=window), NoteWriter(), TokenMeter()
    )

    assert events == []
    assert state == ContextState()
    assert build_request(history, state) == history


async def test_past_strip_at_old_results_become_stubs_in_one_batch() -> None:
    history = session(20)
    window = int(TokenMeter().estimate(history) / 0.6)
    meter = TokenMeter()

    state, events = await end_of_turn(
        history, ContextState(), Settings(context_window=window), NoteWriter(), meter
    )

    assert [event.strategy for event in events] == ["strip"]
    assert events[0].after < events[0].before
    assert meter.context_tokens == events[0].after, "the meter follows the rewrite"
    request = build_request(history, state)
    stubs = [m for m in request if m["role"] == "tool" and "[output trimmed:" in m["content"]]
    assert len(stubs) == 19, "every result but the last call's"
    assert stubs[0]["content"].startswith("x" * 300)
    assert request[-3:] == history[-3:], "the last call, its result and the answer are whole"


async def test_a_state_sends_the_same_stub_objects_at_every_request() -> None:
    """So the request encoder reuses their bytes by identity: a million-token session with its
    old results stubbed would otherwise make and match hundreds of stubs at every call."""
    history = session(20)
    window = int(TokenMeter().estimate(history) / 0.6)
    state, _ = await end_of_turn(
        history, ContextState(), Settings(context_window=window), NoteWriter(), TokenMeter()
    )
    first = build_request(history, state)
    history.append({"role": "user", "content": "and now?"})
    later = build_request(history, state)

    stubs = [i for i, m in enumerate(first) if m is not history[i]]
    assert len(stubs) == 19
    assert all(later[i] is first[i] for i in stubs), "the same objects, not equal copies"
    moved = dataclasses.replace(state, stub_chars=state.stub_chars + 1)
    assert all(build_request(history, moved)[i] is not first[i] for i in stubs)
    assert set(state.to_json()) == {
        "strip_before",
        "stub_chars",
        "drop_before",
        "note",
        "note_from",
        "decided_at",
    }, "what the state made is not recorded"


async def test_a_strip_that_saves_little_waits_for_a_bigger_batch() -> None:
    history = session(3, size=1000)
    history.insert(2, {"role": "user", "content": "y" * 400_000})
    history.insert(3, {"role": "assistant", "content": "ok"})
    window = int(TokenMeter().estimate(history) / 0.6)
    view = View(history, ContextState(), TokenMeter())
    stripped = await Strip().apply(view, 0)
    assert stripped is not None
    assert stripped.tokens < view.tokens
    assert stripped.tokens > window * (0.5 - STRIP_HEADROOM), "it would leave too little room"

    state, events = await end_of_turn(
        history, ContextState(), Settings(context_window=window), NoteWriter(), TokenMeter()
    )

    assert events == []
    assert state == ContextState()


async def test_drop_replaces_whole_results_oldest_first_until_under_compact_at() -> None:
    history = session(12)
    meter = TokenMeter()
    view = View(history, ContextState(), meter)
    target = view.tokens - 3 * 2200  # a little less than three results too many

    after = await Drop().apply(view, target)

    assert after is not None
    assert after.tokens <= target
    sent = [m["content"] for m in after.messages if m["role"] == "tool"]
    markers = [text.startswith("[output dropped") for text in sent]
    assert markers == [True] * 3 + [False] * 9
    assert "\n" not in sent[0], "one line"


async def test_before_call_does_nothing_until_one_turn_outgrows_compact_at() -> None:
    history = session(5)
    meter = TokenMeter()
    meter.rebase(request_bytes(history))
    roomy = Settings(context_window=meter.context_tokens * 2)

    state, events = await before_call(history, ContextState(), roomy, NoteWriter(), meter)

    assert events == []
    assert state == ContextState()


async def test_a_long_turn_is_shrunk_before_the_call_without_touching_unseen_results() -> None:
    history = session(30)[:-1]  # mid-turn: no answer yet, and two results the model has not seen
    call = {"id": "call_x", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    history.append({"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "y"}]})
    history += [
        {"role": "tool", "tool_call_id": "call_x", "content": "fresh " * 2000},
        {"role": "tool", "tool_call_id": "y", "content": "also fresh " * 2000},
    ]
    meter = TokenMeter()
    meter.rebase(request_bytes(history))
    tight = Settings(context_window=int(meter.context_tokens / 0.9))

    state, events = await before_call(history, ContextState(), tight, NoteWriter(), meter)

    assert [event.point for event in events] == ["before_call"]
    request = check_request(history, state)
    assert request[-4:-1] == history[-3:], "the call and both unseen results are untouched"
    assert meter.context_tokens < tight.context_window * tight.strip_at


async def test_a_recorded_state_that_does_not_fit_the_history_is_ignored() -> None:
    history = session(4)
    record = ContextEvent(
        "compact", 10, 5, ContextState(note="n", note_from=3, decided_at=50), "end_of_turn"
    ).record()

    state, problem = restore_state([record], history)

    assert state == ContextState()
    assert problem is not None
    assert "decided on 50 messages" in problem
    record["context"]["decided_at"] = 5
    state, problem = restore_state([record], history)
    assert problem is not None
    assert "tool result without its call" in problem


def test_a_stub_keeps_untrusted_text_closed_and_never_grows() -> None:
    wrapped = '<untrusted source="bash">' + "z" * 1000 + "</untrusted>"

    text = stub(wrapped, 100)

    assert text.startswith('<untrusted source="bash">' + "z" * 75)
    head, marker = text.rsplit("\n", 1)
    assert head.endswith("</untrusted>")
    assert marker.startswith("[output trimmed:")
    assert stub("short", 100) == "short"
    assert stub("q" * 200, 100) == "q" * 200, "a stub that saves little is not used"
    assert dropped("tiny") == "tiny"


def test_the_head_is_the_system_prompt_and_the_first_prompt() -> None:
    history = session(1)
    assert head_end(history) == 2
    assert head_end(history[:1]) == 1
    assert protected_start(history) == 2, "the answer and the call whose result precedes it"


async def test_a_compaction_never_separates_a_call_from_its_results() -> None:
    big_write = json.dumps({"path": "new.py", "content": "w" * 20_000})
    call = {
        "id": "w1",
        "type": "function",
        "function": {"name": "write_file", "arguments": big_write},
    }
    history = [
        *session(6, size=3000)[:-1],
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "w1", "content": "created new.py"},
        {"role": "user", "content": "Now run the tests."},
        {"role": "assistant", "content": "They pass."},
    ]
    view = View(history, ContextState(), TokenMeter())
    # Room for the small tail after the write's result, not for the write itself.
    target = TokenMeter().estimate([*history[:2], *history[-3:]]) + 400

    after = await Compact(NoteWriter(300), cut_to=target, window=100_000).apply(view, target)

    assert after is not None
    assert history[after.state.note_from]["role"] != "tool"
    check_request(history, after.state)


class Untouchable(list[Message]):
    """A history that fails the test if anything reads it."""

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("the history was read")

    def __iter__(self) -> Any:
        raise AssertionError("the history was read")


async def test_when_nothing_is_needed_no_decision_reads_the_history() -> None:
    history = Untouchable(session(3))
    meter = TokenMeter()
    meter.rebase(request_bytes(session(3)))
    roomy = Settings(context_window=meter.context_tokens * 3)

    assert await end_of_turn(history, ContextState(), roomy, NoteWriter(), meter) == (
        ContextState(),
        [],
    )
    assert await before_call(history, ContextState(), roomy, NoteWriter(), meter) == (
        ContextState(),
        [],
    )


async def test_the_layers_run_in_rare_batches_and_the_prefix_holds_in_between() -> None:
    history = session(1)
    settings_ = Settings(context_window=20_000)  # strip past 10 000 tokens, drop past 17 000
    meter = TokenMeter()
    meter.rebase(request_bytes(history))
    state = ContextState()
    batches: list[int] = []
    strategies: set[str] = set()
    previous: list[Message] | None = None
    for turn in range(60):
        prompt = {"role": "user", "content": f"Turn {turn}: read the next file. " + "p" * 300}
        call = {
            "id": f"t{turn}",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        }
        for message in (
            prompt,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"t{turn}", "content": "r" * 6000},
            {"role": "assistant", "content": "Read it. " + "a" * 300},
        ):
            history.append(message)
            meter.added(message)
        request = build_request(history, state)
        if previous is not None and not (batches and batches[-1] == turn - 1):
            assert request[: len(previous)] == previous, f"turn {turn} rewrote the prefix"
        previous = request
        state, events = await end_of_turn(history, state, settings_, NoteWriter(), meter)
        if events:
            assert events[-1].after < events[0].before
            batches.append(turn)
            strategies.update(event.strategy for event in events)
            if events[0].before <= 20_000 * 0.85:  # a strip below compactAt leaves room
                assert events[-1].after <= 20_000 * (0.5 - STRIP_HEADROOM)

    assert strategies == {"strip", "drop", "compact"}, "a long session reaches every layer"
    gaps = [later - earlier for earlier, later in itertools.pairwise(batches)]
    # Each turn adds a tenth of the window here: still, never two batches in a row.
    assert min(gaps) >= 2, f"batches at turns {batches}"
    assert len(batches) <= 60 // 3, f"batches at turns {batches}"
