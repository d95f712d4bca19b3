"""MCP servers' tools end to end: `lsp-agent serve` driven by a real LSP client, the scripted
model on loopback, and real MCP servers written with the same SDK (`mcp_story_server.py`) over
stdio and streamable HTTP.

A story server leaves facts in its marks folder — `started-<pid>` when it starts, the files its
`touch` tool makes — so that "nothing ran" and "no process was started" are checked on the
disk and in /proc, not taken from the server's word."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests import processes
from tests.conftest import EDITORS, Launcher, settings_for
from tests.editor import start_editor
from tests.fake_model import ScriptedModel, reply, told, tool_call

STORY = Path(__file__).with_name("mcp_story_server.py")
# The refusal comes first on the wire: a client that preselects the first action denies.
ACTIONS = ["Deny", "Allow", "Allow for this session"]
ALL_STORY_TOOLS = {"tool": "mcp__story__*", "decision": "allow"}


def story(marks: Path, *flags: str, **entry: Any) -> dict[str, Any]:
    """The `mcpServers` entry of a story server over stdio."""
    return {"command": sys.executable, "args": [str(STORY), str(marks), *flags], **entry}


def answering(*titles: str | None) -> Any:
    """The user answers the questions in this order (the last answer for any later one)."""
    answers = list(titles)

    def answer(_: types.ShowMessageRequestParams) -> str | None:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return answer


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def started(marks: Path) -> list[Path]:
    """The story servers that started, by the file each leaves when it does."""
    return sorted(marks.glob("started-*")) if marks.exists() else []


def reminder(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    return tmp_path / "marks"


@pytest.mark.parametrize("editor_name", EDITORS)
async def test_a_tool_is_listed_then_runs_once_the_user_allows_it_and_stops_with_the_server(
    launch: Launcher, model: ScriptedModel, marks: Path, editor_name: str
) -> None:
    settings = settings_for(model, mcpServers={"story": story(marks)})
    model.add(tool_call("mcp__story__touch", {"name": "made.txt"}), reply("Made it."))
    async with launch(editor_name, settings) as editor:
        editor.answer = answering("Allow")
        result = await editor.ask("make a file with the story server")
        status = await editor.command("lspAgent.status", {})
        assert processes.running(str(marks))

    assert result.status == "completed"
    assert (marks / "made.txt").exists()
    names = tool_names(model.requests[0])
    assert {"mcp__story__echo", "mcp__story__touch", "mcp__story__big"} <= set(names)
    assert names[: names.index("mcp__story__echo")] == names[: len(names) - 8]  # ours first
    assert "mcp__story__broken" not in names  # its schema is no JSON Schema: left out
    (echo,) = [t for t in model.requests[0]["tools"] if t["function"]["name"] == "mcp__story__echo"]
    description = echo["function"]["description"]
    assert '<untrusted source="mcp server story">' in description
    assert description.count("</untrusted>") == 1  # the server's own closing tag is gone

    (question,) = editor.questions
    assert question.type == types.MessageType.Warning
    assert [action.title for action in question.actions or []] == ACTIONS
    assert "'touch' of the MCP server 'story'" in question.message
    assert '"name": "made.txt"' in question.message  # the arguments, whole

    answer = told(model, "mcp__story__touch")
    assert '<untrusted source="mcp server story, tool touch">' in answer
    assert "made made.txt" in answer
    tool = editor.events_of("tool")[0]
    assert tool["name"] == "mcp__story__touch"
    assert tool["args"] == {"name": "made.txt"}
    assert editor.events_of("permission")[0]["decision"] == "allow"
    assert editor.events_of("toolResult")[0]["ok"] is True

    logged = [message.message for message in editor.client.log_messages]
    assert any("MCP server 'story': story server ready" in line for line in logged)  # stderr
    assert any("tool 'broken' is left out: its input schema" in line for line in logged)
    (server,) = status.mcp.servers
    assert (server.server, server.state, server.tools, server.calls) == ("story", "running", 9, 1)
    assert server.pid > 0
    assert server.leftOut[0].tool == "broken"
    # Stopped with the language server: the process and its group are gone.
    assert processes.gone(str(marks))


async def test_a_denied_call_runs_nothing_and_an_allowed_one_does(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    settings = settings_for(model, mcpServers={"story": story(marks)})
    async with launch("visual-studio-code", settings) as editor:
        editor.answer = answering("Deny")
        model.add(tool_call("mcp__story__touch", {"name": "denied.txt"}), reply("Not allowed."))
        denied = await editor.ask("make a file")
        refusal = told(model, "mcp__story__touch")

        editor.answer = answering("Allow for this session")
        model.add(
            tool_call("mcp__story__touch", {"name": "one.txt"}),
            tool_call("mcp__story__touch", {"name": "two.txt"}),
            reply("Both made."),
        )
        allowed = await editor.ask("make two files")

    assert denied.status == allowed.status == "completed"
    assert not (marks / "denied.txt").exists()
    assert "Nothing ran" in refusal
    assert editor.events_of("permission")[0]["decision"] == "deny"
    # The control: the same tool, allowed, has its effect; "for this session" asks once.
    assert (marks / "one.txt").exists()
    assert (marks / "two.txt").exists()
    assert len(editor.questions) == 2


async def test_the_allowlist_skips_the_question_and_auto_mode_does_not(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    rules = [
        {"tool": "mcp__story__echo", "decision": "allow"},
        {"tool": "mcp__story__*", "match": "readOnly", "decision": "allow"},
    ]
    settings = settings_for(
        model, mcpServers={"story": story(marks)}, permissions=rules, mode="auto"
    )
    model.add(
        tool_call("mcp__story__echo", {"text": "hello"}),
        tool_call("mcp__story__read_file", {"path": "hello.py"}),
        tool_call("mcp__story__read_file", {"path": ".env"}),
        tool_call("mcp__story__touch", {"name": "auto.txt"}),
        reply("Done."),
    )
    async with launch("visual-studio-code", settings) as editor:
        result = await editor.ask("use the story tools")  # every question is dismissed

    assert result.status == "completed"
    assert "echo: hello" in model.requests[1]["messages"][-2]["content"]
    assert "pretend content of hello.py" in model.requests[2]["messages"][-2]["content"]
    # Allowed as read-only, asked all the same for a secret path; auto mode asks MCP calls.
    asked = [q.message for q in editor.questions]
    assert len(asked) == 2
    assert ".env" in asked[0]
    assert "may hold secrets" in asked[0]
    assert "'touch'" in asked[1]
    assert not (marks / "auto.txt").exists()


async def test_a_workspace_server_starts_only_once_the_user_confirms_it(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    entry = {"mcpServers": {"story": story(marks)}}
    (launch.root / ".mcp.json").write_text(json.dumps(entry), encoding="utf-8")
    async with launch("visual-studio-code", settings_for(model)) as editor:
        # The repository is open and the server running: nothing was started.
        before = (await editor.command("lspAgent.status", {})).mcp.servers[0]
        assert (before.state, before.confirmation) == ("notStarted", "notAsked")
        assert started(marks) == []

        editor.answer = answering("Not now")
        model.add(reply("Without it."))
        await editor.ask("hello")
        (question,) = editor.questions
        assert f"{sys.executable} {STORY} {marks}" in question.message
        assert [a.title for a in question.actions or []] == ["Start", "Not now", "Never"]
        assert started(marks) == []
        assert processes.running(str(marks)) == []
        assert not any(name.startswith("mcp__") for name in tool_names(model.requests[-1]))

        editor.answer = answering("Start", "Allow")
        editor.session = (await editor.command("lspAgent.newSession", {})).session
        model.add(tool_call("mcp__story__echo", {"text": "hi"}), reply("It answered."))
        await editor.ask("now with it")
        assert len(started(marks)) == 1
        assert "echo: hi" in told(model, "mcp__story__echo")

        # Remembered for this workspace: the next session asks about the call only.
        editor.session = (await editor.command("lspAgent.newSession", {})).session
        model.add(tool_call("mcp__story__echo", {"text": "again"}), reply("Again."))
        await editor.ask("once more")
        after = (await editor.command("lspAgent.status", {})).mcp.servers[0]

    messages = [q.message for q in editor.questions]
    assert sum("asks lsp-agent to start" in m for m in messages) == 2
    assert (after.state, after.confirmation) == ("running", "confirmed")
    assert len(started(marks)) == 1  # one process served both sessions


async def test_a_server_that_does_not_start_is_told_once_and_the_turn_goes_on(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    settings = settings_for(model, mcpServers={"story": story(marks, "--fail")})
    model.add(tool_call("read_file", {"path": "hello.py"}), reply("Read it without MCP."))
    async with launch("visual-studio-code", settings) as editor:
        result = await editor.ask("read hello.py")
        status = await editor.command("lspAgent.status", {})

    assert result.status == "completed"
    note = reminder(model.requests[0])
    assert "The MCP server 'story' could not start (it exited before it answered" in note
    assert '<untrusted source="mcp server story stderr">' in note
    assert "its configuration is missing" in note
    assert "could not start" not in reminder(model.requests[1])  # told once
    (server,) = status.mcp.servers
    assert server.state == "failed"
    assert "exit status 2" in server.lastError
    shown = [m.message for m in editor.client.messages if m.type == types.MessageType.Warning]
    assert any("MCP server 'story' did not start" in message for message in shown)


async def test_a_server_that_crashes_mid_call_is_told_and_started_again(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    settings = settings_for(
        model, mcpServers={"story": story(marks)}, permissions=[ALL_STORY_TOOLS]
    )
    model.add(
        tool_call("mcp__story__crash", {}),
        tool_call("mcp__story__echo", {"text": "back"}),
        reply("It came back."),
    )
    async with launch("visual-studio-code", settings) as editor:
        result = await editor.ask("crash it")

    assert result.status == "completed"
    crashed = model.requests[1]["messages"][-2]["content"]
    assert "stopped during the call (exit status 3)" in crashed
    assert "the story server crashes on purpose" in crashed
    assert "echo: back" in told(model, "mcp__story__echo")
    assert len(started(marks)) == 2


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("mcp__story__hang", "did not answer within 2 s"),
        ("mcp__story__garbage", "its answer is not an MCP tool result"),
    ],
)
async def test_no_answer_or_garbage_is_told_as_the_calls_result(
    launch: Launcher, model: ScriptedModel, marks: Path, tool: str, said: str
) -> None:
    settings = settings_for(
        model, mcpServers={"story": story(marks, timeout=2)}, permissions=[ALL_STORY_TOOLS]
    )
    model.add(tool_call(tool, {}), tool_call("mcp__story__echo", {"text": "still"}), reply("ok"))
    async with launch("visual-studio-code", settings) as editor:
        result = await editor.ask("try it")
        status = await editor.command("lspAgent.status", {})

    assert result.status == "completed"
    assert said in told(model, tool)
    assert "echo: still" in told(model, "mcp__story__echo")  # the same server goes on
    assert said in status.mcp.servers[0].lastError
    if tool == "mcp__story__garbage":
        logged = [message.message for message in editor.client.log_messages]
        assert any("wrote a line that is not JSON-RPC" in line for line in logged)


async def test_a_50_mb_answer_is_capped_and_spilled(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    settings = settings_for(
        model, mcpServers={"story": story(marks)}, permissions=[ALL_STORY_TOOLS]
    )
    model.add(tool_call("mcp__story__big", {"megabytes": 50}), reply("That was big."))
    async with launch("visual-studio-code", settings) as editor:
        result = await editor.ask("get the big thing")

    assert result.status == "completed"
    answer = told(model, "mcp__story__big")
    assert len(answer) < 12_000  # toolOutputCap, and the note
    line = 65  # the story server's lines, as many as fit in 50 MB
    assert f"of {line * (50 * 1024 * 1024 // line):,} bytes cut here" in answer
    assert "first 33,554,432 bytes of the output are in" in answer  # the spill's own bound


@pytest.fixture
def http_story(marks: Path) -> Iterator[str]:
    """A story server over streamable HTTP on loopback that wants `Bearer story-token`."""
    env = {**os.environ, "STORY_TOKEN": "story-token"}
    server = subprocess.Popen(
        [sys.executable, str(STORY), str(marks), "--http"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], 60)  # a hang guard
    assert ready, "the HTTP story server did not say where it listens"
    yield server.stdout.readline().strip()
    server.terminate()
    server.wait(timeout=10)


async def test_an_http_server_gets_its_token_from_a_named_variable(
    launch: Launcher, model: ScriptedModel, http_story: str
) -> None:
    # The token lives in ~/.agents/env; the configuration only names it.
    (launch.home / ".agents").mkdir()
    (launch.home / ".agents" / "env").write_text("STORY_TOKEN=story-token\n")
    servers = {
        "remote": {"url": http_story, "headers": {"Authorization": "Bearer ${STORY_TOKEN}"}},
        "locked": {"url": http_story},
    }
    settings = settings_for(
        model, mcpServers=servers, permissions=[{"tool": "mcp__remote__*", "decision": "allow"}]
    )
    model.add(
        tool_call("mcp__remote__echo", {"text": "over http"}),
        tool_call("mcp__remote__media", {}),
        reply("Done."),
    )
    async with launch("visual-studio-code", settings) as editor:
        result = await editor.ask("use the remote server")
        status = await editor.command("lspAgent.status", {})

    assert result.status == "completed"
    assert "echo: over http" in told(model, "mcp__remote__echo")
    media = told(model, "mcp__remote__media")
    assert "[image: image/png, 2.0 KB; not shown" in media
    assert "resource text" in media
    assert "binary; not shown" in media
    assert "[resource link: <https://example.com/doc>" in media
    assert PIXEL_START not in media  # base64 is described, never pasted
    assert not any(n.startswith("mcp__locked__") for n in tool_names(model.requests[0]))
    assert "'locked' could not start" in reminder(model.requests[0])
    by_name = {s.server: s for s in status.mcp.servers}
    assert by_name["remote"].state == "running"
    assert by_name["remote"].headers == ["Authorization"]  # the name, never the value
    assert by_name["locked"].state == "failed"
    assert "story-token" not in json.dumps(status.mcp, default=vars)


PIXEL_START = "iVBORw0KGgo"


def prefix_of_next(bodies: list[bytes], requests: list[dict[str, Any]]) -> list[bool]:
    """For each request but the last: whether its body up to its reminder (never stored)
    begins the next body, byte for byte."""
    found = []
    for index in range(len(bodies) - 1):
        last = requests[index]["messages"][-1]
        encoded = json.dumps(last, ensure_ascii=False, separators=(",", ":")).encode()
        cut = bodies[index].rfind(encoded)
        assert cut > 0, "the reminder is not where it should be"
        found.append(bodies[index + 1].startswith(bodies[index][:cut]))
    return found


async def test_the_tool_list_is_fixed_for_a_session_and_the_prefix_holds(
    launch: Launcher, model: ScriptedModel, marks: Path, tmp_path: Path
) -> None:
    settings = settings_for(
        model,
        mcpServers={"story": story(marks)},
        permissions=[ALL_STORY_TOOLS, {"tool": "mcp__later__*", "decision": "allow"}],
    )
    async with launch("visual-studio-code", settings) as editor:
        editor.session = (await editor.command("lspAgent.newSession", {})).session
        for turn in range(3):
            model.add(
                tool_call("mcp__story__echo", {"text": f"turn {turn}"}),
                tool_call("read_file", {"path": "hello.py"}),
                tool_call("mcp__story__media", {}),
                reply(f"Turn {turn} done."),
            )
            await editor.ask(f"turn {turn}")
            if turn == 0:  # a server added now applies to the next session
                later = {"mcpServers": {"later": story(tmp_path / "later-marks")}}
                (launch.home / ".agents").mkdir()
                (launch.home / ".agents" / "mcp.json").write_text(json.dumps(later))
        session_bodies, session_requests = model.bodies, model.requests
        editor.session = (await editor.command("lspAgent.newSession", {})).session
        model.add(tool_call("mcp__later__echo", {"text": "new"}), reply("New session."))
        await editor.ask("a new session")

    assert len(session_requests) == 12
    tools = {json.dumps(request["tools"]) for request in session_requests}
    assert len(tools) == 1  # the same tools, in the same order, in every request
    assert all(prefix_of_next(session_bodies, session_requests))
    assert "mcp__later__echo" not in tool_names(session_requests[-1])
    assert "mcp__later__echo" in tool_names(model.requests[-1])
    assert "echo: new" in told(model, "mcp__later__echo")


async def test_a_turn_cancelled_during_a_call_leaves_the_server_usable(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    settings = settings_for(
        model, mcpServers={"story": story(marks)}, permissions=[ALL_STORY_TOOLS]
    )
    model.add(tool_call("mcp__story__hang", {}))
    async with launch("visual-studio-code", settings) as editor:
        session = (await editor.command("lspAgent.newSession", {})).session
        editor.session = session
        asked = asyncio.create_task(editor.ask("wait for ever"))
        await editor.wait_for_event("tool", name="mcp__story__hang")
        await editor.command("lspAgent.cancel", {"session": session})
        cancelled = await asked
        model.add(tool_call("mcp__story__echo", {"text": "again"}), reply("Fine."))
        after = await editor.ask("go on")

    assert cancelled.status == "cancelled"
    assert after.status == "completed"
    assert "echo: again" in told(model, "mcp__story__echo")
    assert len(started(marks)) == 1  # the same process answered


async def test_sigterm_ends_the_server_and_stops_its_mcp_servers_even_a_stubborn_one(
    launch: Launcher, model: ScriptedModel, marks: Path
) -> None:
    # An editor that stops its server with SIGTERM (VS Code's client, once the grace after
    # closing stdin is over; a process manager): the MCP servers run in their own process
    # groups, so only the server can stop them. This one ignores SIGTERM and its stdin's end.
    settings = settings_for(model, mcpServers={"story": story(marks, "--stubborn")})
    model.add(reply("Ready."))
    editor = await start_editor(
        launch.root, "visual-studio-code", settings, state_dir=launch.state_dir, home=launch.home
    )
    try:
        result = await editor.ask("hello")  # the session's first turn starts its MCP servers
        assert result.status == "completed"
        children = processes.running(str(marks))
        assert children  # it ran
        parents = {processes.parent(pid) for pid in children}
        servers = [pid for pid in parents if "lsp_agent" in processes.command_line(pid)]
        (server,) = servers
        os.kill(server, signal.SIGTERM)
        assert processes.gone(f"{server}", within=15.0, by_pid=True), "the server went on"
        assert processes.gone(str(marks)), "an MCP server outlived the language server"
        # And what it started, in its process group (a stubborn server's own child).
        (grandchild,) = [int(mark.name.split("-")[1]) for mark in marks.glob("child-*")]
        assert processes.gone(str(grandchild), by_pid=True), "the MCP server's child lived on"
    finally:
        with contextlib.suppress(Exception):
            await editor.client.stop()
