"""The Neovim plugin end to end, on Debian's Neovim 0.7.2 and on a current 0.11.

Each story runs a real headless Neovim with the plugin (`editors/neovim/`), the real server
(`lsp-agent serve`, started by the plugin) and the scripted model on loopback. The user's part is
a Lua scenario in `editors/neovim/tests/scenarios/`: it types commands and review keys through
Neovim's typeahead and records what the user sees (answer buffer, reviews) in a JSON file; this
file checks that, the workspace on disk, and what the model was told. Typing at a real terminal,
while reviews and questions arrive, is in `test_neovim_typing.py`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from tests.fake_model import ScriptedModel, hang_after, reply, tool_call
from tests.neovim import PLUGIN, Editor, editor, nvim, tool_results, user_message

__all__ = ["editor", "nvim"]  # the fixtures, used by the tests below


def test_the_answer_streams_into_the_answer_buffer(editor: Editor, model: ScriptedModel) -> None:
    model.add(reply("Hello from the agent.\nSecond line.", chunks=4, delay=0.4))

    result = editor.run("answer_streams").result

    assert result["status_while_running"].startswith("lsp-agent:")
    assert "Hello from the agent." not in "\n".join(result["streaming_answer"])  # still arriving
    answer = result["answer"]
    assert "## say hello" in answer
    assert "_(hello.py)_" in answer
    assert "Hello from the agent." in answer
    assert "Second line." in answer
    assert answer[-1] == "_completed_"
    assert result["status_after"] == ""
    assert result["answer_window_shown"]
    assert result["current_buffer"] == "hello.py"
    assert (result["answer_filetype"], result["answer_buftype"]) == ("markdown", "nofile")
    assert "The user is looking at hello.py" in user_message(model.requests[0])


GREETING = 'def greet():\n    return "hello"\n'


def read_then_edit(path: str, old: str, new: str) -> list[Any]:
    return [
        tool_call("read_file", {"path": path}),
        tool_call("edit_file", {"path": path, "old": old, "new": new}),
    ]


def test_the_user_accepts_two_edits_and_rejects_one_with_a_reason(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "other.py").write_text("x = 1\n")
    model.add(
        *read_then_edit("hello.py", '"hello"', '"hello, world"'),
        tool_call("write_file", {"path": "pkg/new.py", "content": "VALUE = 42\n"}),
        *read_then_edit("other.py", "x = 1", "x = 2"),
        reply("Done."),
    )

    result = editor.run("review").result

    # What the user saw: each edit as a diff to accept or reject.
    first, second, third = result["reviews"]
    assert "# lsp-agent: hello.py" in first
    assert '-    return "hello"' in first
    assert '+    return "hello, world"' in first
    assert any(line.startswith("@@ -1,2 +1,2 @@") and line.endswith("[x]") for line in first)
    assert "--- /dev/null" in second
    assert "+VALUE = 42" in second
    assert "-x = 1" in third
    assert "+x = 2" in third
    # What happened: accepted edits are applied and written, the rejected one is not.
    assert (workspace / "hello.py").read_text() == GREETING.replace("hello", "hello, world")
    assert result["hello_buffer"] == ["def greet():", '    return "hello, world"']
    assert result["hello_modified"] is False  # written, so commands the agent runs see it
    assert (workspace / "pkg" / "new.py").read_text() == "VALUE = 42\n"
    assert (workspace / "other.py").read_text() == "x = 1\n"
    # What the model was told.
    told = tool_results(model.requests[-1])
    assert told[1].startswith("applied: hello.py")
    assert told[2].startswith("created: pkg/new.py")
    assert "the user rejected this edit to other.py: keep other.py as it is" in told[4]
    # The review windows are gone; the user is back in the file they were in.
    assert result["windows"] == 2
    assert result["current_buffer"] == "hello.py"
    answer = result["answer"]
    assert "- `edit_file` hello.py" in answer
    assert any(line.startswith("  ✓ applied hello.py") for line in answer)
    assert any(line.startswith("  ✗ rejected other.py") for line in answer)
    assert "_edits: 3 proposed, 2 applied, 1 rejected_" in answer


def test_the_user_keeps_one_hunk_of_two(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    lines = [f"line {i}\n" for i in range(1, 13)]
    (workspace / "lines.txt").write_text("".join(lines))
    old = "".join(lines[0:10])
    new = old.replace("line 1\n", "line one\n").replace("line 10\n", "line ten\n")
    model.add(*read_then_edit("lines.txt", old, new), reply("Numbered."))

    result = editor.run("per_hunk").result

    (review,) = result["reviews"]
    headers = [line for line in review if line.startswith("@@")]
    assert len(headers) == 2
    assert all(h.endswith("[x]") for h in headers)
    toggled = [line for line in result["after_toggle"] if line.startswith("@@")]
    assert toggled[0].endswith("[x]")
    assert toggled[1].endswith("[ ]")
    # The unticked hunk loses its red and green: no diff syntax, only the skipped lines' colour.
    assert [(u["line"], u["syntax"], u["group"]) for u in result["unticked"]] == [
        ("-line 10", "", "LspAgentReviewSkipped"),
        ("+line ten", "", "LspAgentReviewSkipped"),
    ]
    assert result["waiting_after_close"] == 1  # closing the window decided nothing
    assert result["reopened"] == result["after_toggle"]
    expected = "".join(lines).replace("line 1\n", "line one\n", 1)
    assert (workspace / "lines.txt").read_text() == expected
    told = tool_results(model.requests[-1])[1]
    assert "the user applied part of your edit to lines.txt (1 of 2 hunks applied" in told
    assert "- hunk 2: replacing line 10: not applied by the user" in told


def test_an_edit_made_for_an_older_buffer_is_refused_then_merged_and_reviewed_again(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(*read_then_edit("hello.py", '"hello"', '"bye"'), reply("Merged with your line."))

    result = editor.run("stale").result

    assert result["hello_buffer"] == ["# typed by the user", "def greet():", '    return "bye"']
    told = tool_results(model.requests[-1])[1]
    assert "hello.py changed since you read it (the user edited line 1)" in told
    assert "your edit was applied on top of their text" in told
    assert "_edits: 1 proposed, 1 applied, 0 rejected_" in result["answer"]


def test_a_rejection_after_typing_in_the_file_is_final_and_its_reason_reaches_the_model(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(*read_then_edit("hello.py", '"hello"', '"bye"'), reply("Kept as it is."))

    result = editor.run("reject_after_typing").result

    assert len(result["reviews"]) == 1  # no second review of the same edit
    told = tool_results(model.requests[-1])[1]
    assert "the user rejected" in told
    assert "keep the greeting" in told
    assert "_edits: 1 proposed, 0 applied, 1 rejected_" in result["answer"]
    assert result["hello_buffer"] == ["# typed by the user", "def greet():", '    return "hello"']


def test_the_user_cancels_a_running_turn(editor: Editor, model: ScriptedModel) -> None:
    model.add(hang_after("Let me think"))

    result = editor.run("cancel").result

    assert model.client_disconnected.wait(5)  # the model stream was closed
    answer = result["answer"]
    assert any("Let me think" in line for line in answer)
    assert answer[-1] == "_cancelled_"
    assert result["notifications"][-1]["message"] == "lsp-agent: nothing is running"


def test_sessions_new_resume_and_status(editor: Editor, model: ScriptedModel) -> None:
    model.add(reply("first"), reply("second"), reply("third"))

    result = editor.run("sessions").result

    # The list the user picked from: newest first, the current session marked.
    (picked,) = result["selects"]
    assert picked["prompt"] == "Resume an lsp-agent session"
    current, older = picked["items"]
    assert current.startswith("* two"), picked["items"]
    assert older.startswith("  one"), picked["items"]
    # The third question continued the first session, not the second.
    asked = [
        [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]
        for request in model.requests
    ]
    assert len(asked) == 3, asked  # one model call per question: none repeated
    said = asked[2]
    assert ("user", "one") in said, asked
    assert ("assistant", "first") in said, asked
    assert all(content not in ("two", "second") for _, content in said), (asked, result["answer"])
    assert result["input_prompt"] == "Ask lsp-agent: "
    status = result["status"]
    assert status[0].startswith("lsp-agent 0.1.0, workspace ")
    assert status[1].startswith("model: test-model (from ")
    assert any(line.startswith("sandbox: ") for line in status)
    assert sum("(current)" in line for line in status) == 1
    assert result["completion"] == ["sessions", "status"]
    nonsense = result["nonsense"]  # an unknown subcommand is an error, with usage
    assert nonsense["level"] == 4  # vim.log.levels.ERROR
    assert nonsense["message"].startswith("lsp-agent: usage: :LspAgent {ask|chat|undo|cancel|")


def test_a_range_or_a_visual_selection_goes_with_the_question(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "unicode.py").write_text('msg = "🙂 héllo wörld"\n', encoding="utf-8")
    model.add(reply("It returns the greeting."), reply("Call it planet."))

    result = editor.run("selection").result

    assert result["encoding"] == ("utf-16" if editor.nvim.label == "0.7" else "utf-8")
    line = user_message(model.requests[0])
    assert line.startswith("explain this line\n")
    assert 'hello.py, line 2:\n```\n    return "hello"\n```' in line
    chars = user_message(model.requests[1])
    assert "unicode.py, line 1:\n```\nwörld\n```" in chars
    assert "_(hello.py, line 2)_" in result["answer"]


def test_a_session_started_while_a_turn_runs_stays_current(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    """The turn's answer comes after the user moved to a new session: it must not move them
    back (the next question would continue the old conversation)."""
    model.add(tool_call("bash", {"command": "touch never.txt"}), reply("first"), reply("second"))

    result = editor.run("session_moved").result

    asked = [
        [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]
        for request in model.requests
    ]
    assert len(asked) == 3, asked
    assert ("user", "one") in asked[0]
    assert ("user", "two") in asked[2], asked
    assert all(content not in ("one", "first") for _, content in asked[2]), (asked, result)
    assert not (workspace / "never.txt").exists()  # the question was answered: Deny


def test_permission_questions_are_answered_in_neovim(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(
        tool_call("bash", {"command": "touch made.txt && echo made"}),
        tool_call("bash", {"command": "touch ignored.txt"}),
        reply("done"),
    )

    result = editor.run("permission").result

    assert result["questions"] == 2
    assert (workspace / "made.txt").exists()
    assert not (workspace / "ignored.txt").exists()
    allowed, dismissed = tool_results(model.requests[-1])
    assert allowed.startswith("exit code 0")
    assert "made" in allowed
    assert "not run" in dismissed
    assert "  permission for bash: allow" in result["answer"]
    assert "  permission for bash: deny" in result["answer"]


def long_answer(label: str, rows: int = 30) -> str:
    return "".join(f"{label} row {i}\n" for i in range(1, rows + 1))


def test_the_answer_window_follows_the_stream_unless_scrolled_up(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(
        reply(long_answer("first"), chunks=15, delay=0.05),
        reply(long_answer("second"), chunks=15, delay=0.05),
        reply(long_answer("third"), chunks=30, delay=0.05),
    )

    result = editor.run("answer_follows").result

    # Following was checked while the text was taller than the window, in both turns.
    first, second = result["samples"]
    assert first >= 1, result["samples"]
    assert second >= 1, result["samples"]
    # The user scrolled up during the third answer: the window stayed at the top.
    scrolled = result["scrolled_up"]
    assert scrolled["top"] == 1
    assert scrolled["bottom"] < scrolled["last"]
    assert "third row 30" in result["answer"]  # the stream went on below
    reopened = result["reopened"]
    assert reopened["bottom"] == reopened["last"]
    assert reopened["top"] > 1


def test_restart_then_ask_reuses_the_answer_window(editor: Editor, model: ScriptedModel) -> None:
    model.add(reply("first answer"), reply("second answer"))

    result = editor.run("restart").result

    assert result["new_server"]
    assert result["windows_before"] == result["windows_after"] == 1
    assert result["same_window"]
    answer = "\n".join(result["answer"])
    assert "first answer" in answer
    assert "second answer" in answer
    assert len(model.requests) == 2


def test_ask_passes_a_work_done_token_so_progress_plugins_see_the_turn(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(
        *read_then_edit("hello.py", '"hello"', '"hi"'),
        reply("It greets."),
    )

    progress = editor.run("progress").result["progress"]

    tokens = {item["token"] for item in progress}
    assert tokens == {"lsp-agent-1"}, progress
    kinds = [item["kind"] for item in progress]
    assert kinds[0] == "begin"
    assert kinds[-1] == "end"
    assert "report" in kinds
    assert progress[0]["title"] == "lsp-agent"
    # A file is named as the user names it, not by its URI.
    messages = [item.get("message") or "" for item in progress]
    assert "applied hello.py" in messages, messages
    assert not any("file://" in message for message in messages)


def test_withdrawn_and_timed_out_questions_close_and_count_as_deny(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    """The server's side (question events, `$/cancelRequest` for a question, `start` and
    `usage` events) comes separately: the scenario injects those messages into the plugin's
    handlers, while the questions and the answers they get go through the real server."""
    model.add(
        tool_call("bash", {"command": "touch first.txt"}),
        tool_call("bash", {"command": "touch second.txt"}),
        reply("Neither ran."),
    )

    result = editor.run("events").result

    assert result["statusline_while_asking"] == (
        "lsp-agent: waiting for your answer (:LspAgent review)"
    )
    assert result["first_request_id"]  # found: the id a `$/cancelRequest` names
    assert result["first_window_open"]
    assert not result["first_window_after"]
    assert not result["first_still_waiting"]
    assert not result["second_still_waiting"]
    # Both questions were answered with no choice, which the server counts as Deny.
    first, second = tool_results(model.requests[-1])
    assert "not run" in first
    assert "not run" in second
    assert not (workspace / "first.txt").exists()
    assert not (workspace / "second.txt").exists()
    answer = result["answer"]
    assert "  no answer in time for bash: denied" in answer
    assert any(line.startswith("_continuing session ") and "7 turns" in line for line in answer)
    assert (
        "last model call: 1200 input tokens (1000 cached), 40 output; context 1500 of 128000"
        in result["status"]
    )


def test_auto_mode_applies_without_a_review(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(*read_then_edit("hello.py", '"hello"', '"hi"'), reply("ok"))

    result = editor.run("auto_mode").result

    assert result["reviews"] == []
    assert (workspace / "hello.py").read_text() == GREETING.replace('"hello"', '"hi"')
    assert tool_results(model.requests[-1])[1].startswith("applied: hello.py")
    assert "_edits: 1 proposed, 1 applied, 0 rejected_" in result["answer"]


def test_checkhealth_runs_doctor_with_the_plugins_settings(editor: Editor) -> None:
    health = editor.run("health").result["health"]

    text = "\n".join(health)
    assert "ERROR" not in text, text
    # doctor's probes, with the endpoint and model of setup({settings = …}) (Neovim's own
    # environment has no LSP_AGENT_* variables here).
    endpoint = next(line for line in health if "endpoint: " in line)
    assert "OK" in endpoint
    assert f"{editor.model.base_url} answers" in endpoint
    assert any("OK" in line and "model: test-model" in line for line in health), text
    assert any("sandbox: " in line for line in health)
    # and the server started from Neovim.
    assert "lsp-agent version 0.1.0" in text
    assert "model: test-model (from editor)" in text


def test_checkhealth_says_bad_when_the_endpoint_is_unreachable(
    editor: Editor, unused_port: int
) -> None:
    unreachable = f"http://127.0.0.1:{unused_port}/v1"

    health = editor.run("health", LSP_AGENT_TEST_BASE_URL=unreachable).result["health"]

    endpoint = next(line for line in health if "endpoint: " in line)
    assert "ERROR" in endpoint, "\n".join(health)
    assert unreachable in endpoint, "\n".join(health)


def test_a_server_not_installed_is_explained_with_an_install_from_a_clone(editor: Editor) -> None:
    result = editor.run("not_installed").result
    said = "\n".join(n["message"] for n in result["notifications"])
    health = "\n".join(result["health"])
    for text in (said, health):
        assert "pipx install /path/to/lsp-agent" in text, text
        assert "pip install lsp-agent" not in text
    assert "lsp-agent-not-installed is not executable" in said


def test_the_code_action_menu_at_the_cursor_sends_the_function(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(reply("It greets."))

    editor.run("code_action")

    asked = user_message(model.requests[-1])
    assert asked.startswith("Explain what this code in hello.py does.")
    assert 'hello.py, lines 1-2:\n```\ndef greet():\n    return "hello"\n```' in asked


def test_checkhealth_passes_every_setting_doctor_reads_by_its_variable() -> None:
    """health.lua's ENVIRONMENT mirrors the server's settings table: each setting that has an
    environment variable, by that variable."""
    from lsp_agent import config

    lua = (PLUGIN / "lua" / "lsp_agent" / "health.lua").read_text()
    table = lua[lua.index("M.ENVIRONMENT = {") : lua.index("}", lua.index("M.ENVIRONMENT = {"))]
    mirrored = dict(re.findall(r'^\s+(\w+) = "(\w+)",$', table, flags=re.MULTILINE))
    expected = {spec.name: spec.env[0] for spec in config._SPECS if spec.env}
    assert mirrored == expected


def test_help_tags_and_links(editor: Editor, tmp_path: Path) -> None:
    rtp = tmp_path / "docrtp"
    shutil.copytree(PLUGIN / "doc", rtp / "doc")

    result = editor.run("help", LSP_AGENT_TEST_DOC_RTP=str(rtp)).result

    assert set(result["opened"].values()) == {"lsp-agent.txt"}
    assert result["broken"] == []
    assert not (PLUGIN / "doc" / "tags").exists()  # generated by plugin managers, not committed


def test_lua_units(editor: Editor) -> None:
    """Positions, hunks, edit parsing and options, checked inside each Neovim."""
    checks = editor.run("units").result["checks"]

    assert len(checks) == 15


def test_the_plugin_mirrors_the_servers_protocol_names() -> None:
    """`protocol.lua` is the plugin's one copy of `lsp_agent/lsp/names.py`: they must agree."""
    from lsp_agent.lsp import names

    lua = (PLUGIN / "lua" / "lsp_agent" / "protocol.lua").read_text()
    mirrored = dict(re.findall(r'^M\.([A-Z_]+) = "([^"]+)"$', lua, flags=re.MULTILINE))
    expected = {
        key: value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)
    }
    assert mirrored == expected
