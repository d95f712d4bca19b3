"""A model endpoint that misbehaves, through the real server: the user reads what it did.

One `lsp-agent serve` for the module, driven by a real LSP client (`tests/editor.py`) and the
scripted endpoint on loopback. Each story makes the endpoint commit one fault on a fresh session
while the editor keeps asking `lspAgent.status`, back to back, and then checks:

- how the turn ended, and that the message says what the endpoint did and what to check;
- that every status request was answered during the fault (the latencies are printed, never
  asserted on: run with `-s` to read them);
- that the transcript holds exactly what the endpoint was sent (each request's messages, the
  reminder aside, are the stored history of that moment) and what it answered;
- that the next ask on the same session completes: no fault poisons a session.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from lsp_agent.session.store import SessionStore
from tests.editor import Editor, start_editor
from tests.fake_model import (
    ScriptedModel,
    StepLike,
    chunk,
    empty_stream,
    flood,
    page,
    raw_stream,
    reply,
    text_chunks,
    tool_call,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOGIN_PAGE = (
    "<!DOCTYPE html><html><head><title>Sign in to Open WebUI</title></head>"
    "<body><form><input name=email><input name=password type=password></form></body></html>"
)
WINDOW = 50_000_000
"""The server's context window: roomy enough that a 20 MB answer is kept whole (the layers that
make room are another story, told elsewhere)."""


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A git workspace, a state directory and a home, for the module's one server."""
    base = tmp_path_factory.mktemp("faults")
    root, state, home = base / "project", base / "state", base / "home"
    for path in (root, state, home):
        path.mkdir()
    (root / "hello.py").write_text('def greet():\n    return "hello"\n', encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return root, state, home


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def editor(places: tuple[Path, Path, Path], model: ScriptedModel) -> AsyncIterator[Editor]:
    root, state, home = places
    settings = {"baseUrl": model.base_url, "model": "test-model", "contextWindow": WINDOW}
    started = await start_editor(root, "visual-studio-code", settings, state_dir=state, home=home)
    model.add(reply("Ready."))  # the first ask loads the agent: not a figure of any fault
    assert (await started.ask("warm up")).status == "completed"
    yield started
    await started.client.shutdown_session()
    await started.client.stop()


class StatusProbe:
    """Asks `lspAgent.status` back to back while a fault plays out, timing each answer."""

    def __init__(self, editor: Editor) -> None:
        self.editor = editor
        self.latencies: list[float] = []
        self._running = True
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StatusProbe:
        self._task = asyncio.create_task(self._probe())
        return self

    async def __aexit__(self, *_: object) -> None:
        self._running = False
        assert self._task is not None
        await self._task

    async def _probe(self) -> None:
        while self._running:
            start = time.perf_counter()
            await self.editor.command("lspAgent.status", {})
            self.latencies.append(time.perf_counter() - start)

    def report(self, label: str) -> str:
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (
            f"{label}: lspAgent.status answered {len(ordered)} times during the fault; "
            f"median {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
            f"max {ordered[-1] * 1000:.1f} ms"
        )


async def fault(
    editor: Editor, model: ScriptedModel, label: str, *steps: StepLike, prompt: str = "go"
) -> tuple[Any, str, int]:
    """Run one ask on a new session while the endpoint answers `steps`; returns the result,
    the session, and the index of the session's first request among the endpoint's."""
    session = (await editor.command("lspAgent.newSession", {})).session
    first = len(model.requests)
    model.add(*steps)
    async with StatusProbe(editor) as probe:
        result = await editor.ask(prompt, session=session)
    assert probe.latencies, "status was never answered during the fault"
    print("\n" + probe.report(label))
    assert model.remaining == 0, "the server made fewer requests than the story scripts"
    return result, session, first


def stored(places: tuple[Path, Path, Path], session: str) -> list[dict[str, Any]]:
    """The session's messages as the transcript on disk holds them."""
    root, state, _ = places
    return SessionStore(root, state).open(session).messages()


def assert_transcript_is_what_was_sent(
    places: tuple[Path, Path, Path], model: ScriptedModel, session: str, first: int
) -> list[dict[str, Any]]:
    """Every request of the session carried the stored history of its moment, then the
    reminder (never stored); returns the stored messages."""
    messages = stored(places, session)
    for body in model.bodies[first:]:
        sent = json.loads(body)["messages"]
        assert sent[-1]["role"] == "user"
        assert "<context>" in sent[-1]["content"]
        assert messages[: len(sent) - 1] == sent[:-1]
    return messages


async def assert_the_session_goes_on(editor: Editor, model: ScriptedModel, session: str) -> None:
    model.add(reply("Back on track."))
    result = await editor.ask("and now?", session=session)
    assert (result.status, result.answer) == ("completed", "Back on track.")


async def test_a_login_page_says_the_base_url_points_at_a_web_site(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(editor, model, "login page", page(LOGIN_PAGE))
    assert result.status == "failed"
    assert "answered 200 with a web page titled 'Sign in to Open WebUI'" in result.error
    assert "lspAgent.baseUrl" in result.error
    assert len(model.requests) == first + 1  # a web page is not worth a second try
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert messages[-1] == {"role": "user", "content": "go"}  # nothing received was stored
    await assert_the_session_goes_on(editor, model, session)


async def test_an_empty_stream_twice_says_so(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(
        editor, model, "empty stream", empty_stream(), empty_stream()
    )
    assert result.status == "failed"
    assert "answered twice with an empty stream" in result.error
    assert "server's log" in result.error
    assert_transcript_is_what_was_sent(places, model, session, first)
    await assert_the_session_goes_on(editor, model, session)


async def test_a_stream_without_choices_is_not_an_empty_answer(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    other_api = raw_stream(*[{"type": "response.output_text.delta", "delta": "Hi"}] * 3)
    result, session, first = await fault(editor, model, "no choices", other_api)
    assert result.status == "failed"
    assert "none of them a chat-completion chunk with `choices`" in result.error
    assert "lspAgent.provider" in result.error
    assert_transcript_is_what_was_sent(places, model, session, first)
    await assert_the_session_goes_on(editor, model, session)


async def test_a_string_delta_is_said_plainly(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(
        editor, model, "string delta", raw_stream(chunk("Hello"), chunk({}, "stop"))
    )
    assert result.status == "failed"
    assert "sent a chunk whose `delta` is 'Hello', not an object" in result.error
    assert "internal error" not in result.error
    assert_transcript_is_what_was_sent(places, model, session, first)
    await assert_the_session_goes_on(editor, model, session)


async def test_a_tool_call_index_that_is_not_a_number_runs_nothing(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    def call(index: Any, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    grafted = raw_stream(
        call("0", id="a", type="function", function={"name": "read_file", "arguments": ""}),
        call("1", id="b", type="function", function={"name": "list_files", "arguments": ""}),
        call("0", function={"arguments": '{"path": "hello.py"}'}),
        call("1", function={"arguments": "{}"}),
        chunk({}, "tool_calls"),
    )
    events_before = len(editor.events)
    result, session, first = await fault(editor, model, "odd tool index", grafted)
    assert result.status == "failed"
    assert "index is '0', not a whole number" in result.error
    kinds = [e["kind"] for e in editor.events[events_before:] if e.get("session") == session]
    assert "status" in kinds
    assert "tool" not in kinds
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert all(m["role"] != "tool" for m in messages)
    await assert_the_session_goes_on(editor, model, session)


async def test_invalid_tool_call_json_goes_back_to_the_model(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(
        editor,
        model,
        "invalid tool-call JSON",
        tool_call("read_file", '{"path": "hello.py"'),
        reply("Let me try that again later."),
    )
    assert result.status == "completed"
    told = json.loads(model.bodies[first + 1])["messages"][-2]
    assert told["role"] == "tool"
    assert "not valid JSON" in told["content"]
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert messages[-1] == {"role": "assistant", "content": "Let me try that again later."}


async def test_a_call_to_an_unknown_tool_goes_back_to_the_model(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(
        editor,
        model,
        "unknown tool",
        tool_call("delete_everything", {"path": "/"}),
        reply("That tool does not exist; done."),
    )
    assert result.status == "completed"
    told = json.loads(model.bodies[first + 1])["messages"][-2]
    assert told["role"] == "tool"
    assert "unknown tool 'delete_everything'" in told["content"]
    assert "read_file" in told["content"]  # it names the tools there are
    assert_transcript_is_what_was_sent(places, model, session, first)


async def test_a_tool_call_without_a_name_goes_back_to_the_model(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    """Small models do emit an empty name now and then: the model is told, the turn goes on."""
    nameless = raw_stream(
        chunk(
            {"tool_calls": [{"index": 0, "id": "n1", "function": {"name": "", "arguments": "{}"}}]}
        ),
        chunk({}, "tool_calls"),
    )
    result, session, first = await fault(
        editor, model, "a tool call without a name", nameless, reply("Sorry, done.")
    )
    assert (result.status, result.answer) == ("completed", "Sorry, done.")
    told = json.loads(model.bodies[first + 1])["messages"][-2]
    assert told["role"] == "tool"
    assert "came without a tool name" in told["content"]
    assert "read_file" in told["content"]
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert messages[-1] == {"role": "assistant", "content": "Sorry, done."}
    await assert_the_session_goes_on(editor, model, session)


async def test_replies_of_nothing_but_malformed_calls_end_the_turn_with_a_sentence(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    """The model is told three times; at the fourth reply in a row that nothing of could run,
    the turn stops and says why, and the session still goes on."""
    broken = [
        tool_call("read_file", '{"path": '),
        tool_call("no_such_tool", {}),
        tool_call("read_file", '["hello.py"]'),
        tool_call("read_file", {"wrong": 1}),
    ]
    result, session, first = await fault(editor, model, "malformed calls", *broken)
    assert result.status == "failed"
    assert "sent 4 replies in a row whose tool calls could not be run" in result.error
    assert "lspAgent.model" in result.error
    assert len(model.requests) == first + 4
    assert_transcript_is_what_was_sent(places, model, session, first)
    await assert_the_session_goes_on(editor, model, session)


async def test_an_emoji_split_across_two_chunks_is_stored_whole(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    split = raw_stream(*text_chunks("Done ", "\ud83d", "\ude00", "!"))
    result, session, first = await fault(editor, model, "split emoji", split)
    assert (result.status, result.answer) == ("completed", "Done \U0001f600!")
    shown = "".join(
        e["text"] for e in editor.events if e["kind"] == "text" and e.get("session") == session
    )
    assert shown == "Done \U0001f600!"
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert messages[-1] == {"role": "assistant", "content": "Done \U0001f600!"}
    await assert_the_session_goes_on(editor, model, session)
    assert "Done \U0001f600!".encode() in model.bodies[-1]  # sent back whole, as UTF-8


async def test_a_truly_lone_surrogate_is_replaced_and_the_session_goes_on(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    lone = raw_stream(*text_chunks("half ", "\ud83d", " a character"))
    result, session, first = await fault(editor, model, "lone surrogate", lone)
    assert (result.status, result.answer) == ("completed", "half \ufffd a character")
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert messages[-1]["content"] == "half \ufffd a character"
    await assert_the_session_goes_on(editor, model, session)


async def test_two_megabytes_in_tiny_deltas_keep_the_editor_answered(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(
        editor, model, "2 MB in 16-character deltas", flood(2_000_000, 16)
    )
    assert result.status == "completed"
    # The ask result carries the answer's start; the transcript keeps all of it.
    assert result.answer.endswith("more characters of this answer are in the session's transcript]")
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert len(messages[-1]["content"]) == 2_000_000
    assert messages[-1]["content"].startswith(result.answer[:1000])
    await assert_the_session_goes_on(editor, model, session)


async def test_twenty_megabytes_in_one_delta_keep_the_editor_answered(
    editor: Editor, model: ScriptedModel, places: tuple[Path, Path, Path]
) -> None:
    result, session, first = await fault(
        editor, model, "20 MB in one delta", flood(20_000_000, 20_000_000)
    )
    assert result.status == "completed"
    # The ask result carries the answer's start; the transcript keeps all of it.
    assert result.answer.endswith("more characters of this answer are in the session's transcript]")
    messages = assert_transcript_is_what_was_sent(places, model, session, first)
    assert len(messages[-1]["content"]) == 20_000_000
    assert messages[-1]["content"].startswith(result.answer[:1000])
    # The editor was sent the reply's start as it streamed, then a note: not 20 MB of events.
    texts = [e["text"] for e in editor.events_of("text") if e["session"] == session]
    assert "".join(texts[:-1]) == messages[-1]["content"][:200_000]
    assert texts[-1] == (
        "\n\n[lsp-agent: 19800000 more characters of this reply are in the session's transcript]"
    )
    await assert_the_session_goes_on(editor, model, session)


@pytest.mark.parametrize(
    ("label", "size", "delta"),
    [
        ("2 MB in 16-character deltas", 2_000_000, 16),
        ("20 MB in one delta", 20_000_000, 20_000_000),
    ],
    ids=["2 MB", "20 MB"],
)
async def test_a_huge_answer_does_not_poison_a_session_with_an_ordinary_window(
    editor: Editor,
    model: ScriptedModel,
    places: tuple[Path, Path, Path],
    label: str,
    size: int,
    delta: int,
) -> None:
    """With the default window (128 000 tokens), a reply of megabytes is capped in what later
    requests carry: the next ask on the session fits and completes; the transcript keeps the
    reply whole."""
    ordinary = {"baseUrl": model.base_url, "model": "test-model", "contextWindow": 128_000}
    await editor.configure(ordinary)
    try:
        result, session, _ = await fault(editor, model, label, flood(size, delta))
        assert result.status == "completed"
        model.add(reply("Back on track."))
        later = await editor.ask("and now?", session=session)
        assert (later.status, later.answer) == ("completed", "Back on track.")
        sent = json.loads(model.bodies[-1])["messages"]
        (answer,) = [
            m for m in sent if m["role"] == "assistant" and "quick brown fox" in m["content"]
        ]
        assert "cut here to fit the context window; the user saw it whole" in answer["content"]
        assert len(answer["content"]) < 40_000
        assert len(model.bodies[-1]) < 128_000 * 3.5  # the request fits the window
        whole = [m for m in stored(places, session) if m["role"] == "assistant"]
        assert len(whole[0]["content"]) == size
    finally:
        await editor.configure(
            {"baseUrl": model.base_url, "model": "test-model", "contextWindow": WINDOW}
        )
