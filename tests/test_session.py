"""Sessions on disk: what a user gets back after a restart, a crash, or a listing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.errors import UserError
from lsp_agent.session.store import (
    STATE_DIR_ENV,
    InvalidSessionIdError,
    SessionStore,
    UnknownSessionError,
    workspace_key,
)
from lsp_agent.session.transcript import INTERRUPTED, Transcript

KEY = "sk-live-0123456789abcdef"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def prompt(transcript: Transcript, turn: int, text: str) -> None:
    transcript.append(
        {"type": "message", "turn": turn, "message": {"role": "user", "content": text}}
    )


def reply(transcript: Transcript, turn: int, text: str) -> None:
    message = {"role": "assistant", "content": text}
    transcript.append({"type": "message", "turn": turn, "message": message})


def call(call_id: str, name: str = "bash") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def next_millisecond() -> None:
    """Return once the clock has moved on to the next millisecond (`started` keeps no finer
    time), so that the next session starts later than the last."""
    now = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == now:
        pass


def test_a_session_written_by_one_process_is_resumed_by_the_next(root: Path, state: Path) -> None:
    first = SessionStore(root, state)
    transcript = first.create()
    system = {"role": "system", "content": "You are a coding agent."}
    transcript.append({"type": "message", "turn": 0, "message": system})
    prompt(transcript, 1, "Rename greet to welcome")
    transcript.append(
        {
            "type": "message",
            "turn": 1,
            "message": {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        }
    )
    tool_result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    transcript.append({"type": "message", "turn": 1, "message": tool_result})
    reply(transcript, 1, "Done.")
    transcript.append({"type": "event", "kind": "usage", "prompt_tokens": 120})
    transcript.append({"type": "turn", "turn": 1, "status": "completed"})
    first.close()

    again = SessionStore(root, state).open(transcript.session_id)

    assert again.path == transcript.path
    assert again.turns == 1
    assert again.messages() == [
        system,
        {"role": "user", "content": "Rename greet to welcome"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        tool_result,
        {"role": "assistant", "content": "Done."},
    ]
    assert again.warnings == []
    records = again.records()
    assert [r["type"] for r in records] == ["session"] + ["message"] * 5 + ["event", "turn"]
    assert all(isinstance(r["ts"], str) and r["ts"].startswith("20") for r in records)
    header = records[0]
    assert header["session"] == transcript.session_id
    assert header["workspace"] == str(root.resolve())
    assert header["version"]


def test_appending_after_a_resume_continues_the_same_file(root: Path, state: Path) -> None:
    transcript = SessionStore(root, state).create()
    prompt(transcript, 1, "first")
    transcript.close()

    resumed = SessionStore(root, state).open(transcript.session_id)
    prompt(resumed, 2, "second")

    assert [m["content"] for m in resumed.messages()] == ["first", "second"]
    assert resumed.turns == 2


def test_sessions_are_listed_newest_first_with_title_and_prompt_count(
    root: Path, state: Path
) -> None:
    store = SessionStore(root, state)
    old = store.create()
    prompt(old, 1, "Fix the failing test in test_api.py\n\nThe user is looking at api.py")
    reply(old, 1, "Fixed.")
    prompt(old, 2, "Now add a changelog entry")
    next_millisecond()  # started times are kept to the millisecond
    empty = store.create()
    next_millisecond()
    new = store.create()
    prompt(new, 1, "   \n  Explain   this " + "very " * 30 + "long function")

    listed = SessionStore(root, state).list()

    assert [info.session for info in listed] == [new.session_id, empty.session_id, old.session_id]
    assert [info.turns for info in listed] == [1, 0, 2]
    assert listed[2].title == "Fix the failing test in test_api.py"
    assert listed[1].title == ""
    assert len(listed[0].title) == 80
    assert listed[0].title.startswith("Explain this very very")
    assert listed[0].title.endswith("…")
    assert listed[0].as_dict() == {
        "session": new.session_id,
        "started": listed[0].started,
        "turns": 1,
        "title": listed[0].title,
    }
    assert listed[0].started > listed[1].started > listed[2].started


def test_a_second_listing_sees_what_was_appended_since(root: Path, state: Path) -> None:
    store = SessionStore(root, state)
    transcript = store.create()
    prompt(transcript, 1, "one")
    assert [info.turns for info in store.list()] == [1]

    prompt(transcript, 2, "two")
    reply(transcript, 2, "a reply that is not a prompt")
    prompt(transcript, 3, "three")

    (info,) = store.list()
    assert (info.turns, info.title) == (3, "one")


def test_a_tool_output_that_quotes_a_user_message_is_not_counted_as_a_prompt(
    root: Path, state: Path
) -> None:
    store = SessionStore(root, state)
    transcript = store.create()
    prompt(transcript, 1, "cat the transcript")
    echoed = '{"type": "message", "role": "user", "content": "fake"}'
    transcript.append(
        {
            "type": "message",
            "turn": 1,
            "message": {"role": "tool", "tool_call_id": "c", "content": echoed},
        }
    )
    transcript.append({"type": "event", "kind": "note", "role": "user"})

    assert store.list()[0].turns == 1
    assert transcript.turns == 1


def test_latest_is_the_most_recent_session_or_none(root: Path, state: Path) -> None:
    store = SessionStore(root, state)
    assert store.latest() is None

    store.create()
    next_millisecond()
    newest = store.create()

    latest = SessionStore(root, state).latest()
    assert latest is not None
    assert latest.session_id == newest.session_id


def test_a_corrupt_last_line_is_skipped_and_later_appends_stay_readable(
    root: Path, state: Path
) -> None:
    transcript = SessionStore(root, state).create()
    prompt(transcript, 1, "before the crash")
    transcript.close()
    with transcript.path.open("ab") as file:
        file.write(b'{"type": "message", "role": "user", "ts": "2026-11-3')

    store = SessionStore(root, state)
    resumed = store.open(transcript.session_id)

    assert resumed.messages() == [{"role": "user", "content": "before the crash"}]
    assert len(resumed.warnings) == 1
    assert "last line" in resumed.warnings[0]
    assert resumed.turns == 1
    assert store.list()[0].turns == 1

    prompt(resumed, 2, "after the crash")

    assert [m["content"] for m in resumed.messages()] == ["before the crash", "after the crash"]
    assert "line 3" in resumed.warnings[0]
    assert resumed.turns == 2
    assert store.list()[0].turns == 2


def test_a_tool_call_without_a_result_gets_an_interrupted_result_on_resume(
    root: Path, state: Path
) -> None:
    transcript = SessionStore(root, state).create()
    prompt(transcript, 1, "run the tests and lint")
    calls = [call("c1"), call("c2"), call("c3")]
    assistant = {"role": "assistant", "content": None, "tool_calls": calls}
    transcript.append({"type": "message", "turn": 1, "message": assistant})
    done = {"role": "tool", "tool_call_id": "c1", "content": "3 passed"}
    transcript.append({"type": "message", "turn": 1, "message": done})
    # The server was killed while c2 ran: c2 and c3 have no result.

    history = SessionStore(root, state).open(transcript.session_id).messages()

    assert history == [
        {"role": "user", "content": "run the tests and lint"},
        assistant,
        done,
        {"role": "tool", "tool_call_id": "c2", "content": INTERRUPTED},
        {"role": "tool", "tool_call_id": "c3", "content": INTERRUPTED},
    ]


def test_an_interrupted_call_in_an_earlier_turn_is_answered_where_it_was_made(
    root: Path, state: Path
) -> None:
    transcript = SessionStore(root, state).create()
    prompt(transcript, 1, "first")
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("c1")]}
    transcript.append({"type": "message", "turn": 1, "message": assistant})
    prompt(transcript, 2, "second")

    history = transcript.messages()

    assert [m["role"] for m in history] == ["user", "assistant", "tool", "user"]
    assert history[2] == {"role": "tool", "tool_call_id": "c1", "content": INTERRUPTED}


def test_tool_results_that_answer_no_pending_call_are_dropped(root: Path, state: Path) -> None:
    transcript = SessionStore(root, state).create()
    prompt(transcript, 1, "go")
    assistant = {"role": "assistant", "content": None, "tool_calls": [call("c1")]}
    transcript.append({"type": "message", "turn": 1, "message": assistant})
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    for message in (result, result, {"role": "tool", "tool_call_id": "ghost", "content": "?"}):
        transcript.append({"type": "message", "turn": 1, "message": message})

    history = transcript.messages()

    assert history == [{"role": "user", "content": "go"}, assistant, result]
    assert any("dropped 2 tool result" in warning for warning in transcript.warnings)


def test_the_api_key_is_never_written_even_inside_nested_tool_output(
    root: Path, state: Path
) -> None:
    store = SessionStore(root, state, secrets=[KEY])
    transcript = store.create()
    prompt(transcript, 1, f"my key is {KEY}, is it valid?")
    output = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": [{"type": "text", "text": f"OPENAI_API_KEY={KEY}\nPATH=/usr/bin"}],
    }
    transcript.append({"type": "message", "turn": 1, "message": output})
    transcript.append(
        {"type": "event", "kind": "error", "detail": {KEY: [("tuple", KEY)], "path": Path(KEY)}}
    )

    raw = transcript.path.read_bytes()

    assert KEY.encode() not in raw
    assert raw.count(b"[redacted]") == 5
    stored = [record["message"] for record in transcript.records() if "message" in record]
    assert stored[0]["content"] == "my key is [redacted], is it valid?"
    assert stored[1]["content"][0]["text"] == "OPENAI_API_KEY=[redacted]\nPATH=/usr/bin"


def test_a_secret_registered_on_a_transcript_applies_to_the_whole_store(
    root: Path, state: Path
) -> None:
    store = SessionStore(root, state)
    first = store.create()
    first.redact(KEY)
    second = store.create()

    prompt(first, 1, KEY)
    prompt(second, 1, KEY)

    assert KEY.encode() not in first.path.read_bytes()
    assert KEY.encode() not in second.path.read_bytes()


def test_a_short_placeholder_key_is_not_redacted_everywhere(root: Path, state: Path) -> None:
    transcript = SessionStore(root, state, secrets=["ollama"]).create()

    prompt(transcript, 1, "start ollama first")

    assert transcript.messages()[0]["content"] == "start ollama first"


@pytest.mark.parametrize(
    "session_id",
    ["../x", "../../../etc/passwd", "20261130-164501-ab12cd/../x", "/tmp/x", "", "a" * 22],
)
def test_a_session_id_that_could_escape_the_directory_is_refused(
    root: Path, state: Path, session_id: str
) -> None:
    store = SessionStore(root, state)

    with pytest.raises(InvalidSessionIdError) as raised:
        store.open(session_id)

    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, UserError)
    assert "not a session id" in str(raised.value)


def test_an_unknown_session_is_a_clear_key_error(root: Path, state: Path) -> None:
    store = SessionStore(root, state)

    with pytest.raises(UnknownSessionError) as raised:
        store.open("20261130-164501-ab12cd")

    assert isinstance(raised.value, KeyError)
    assert isinstance(raised.value, UserError)
    assert str(raised.value).startswith("no session 20261130-164501-ab12cd in workspace ")


def test_a_malformed_record_is_refused_before_anything_is_written(root: Path, state: Path) -> None:
    transcript = SessionStore(root, state).create()
    size = transcript.path.stat().st_size

    with pytest.raises(ValueError, match="record type"):
        transcript.append({"kind": "usage"})
    with pytest.raises(ValueError, match="role"):
        transcript.append({"type": "message", "message": {"content": "no role"}})

    assert transcript.path.stat().st_size == size


def test_sessions_live_under_the_state_dir_in_a_readable_per_workspace_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "from-env"))
    one = tmp_path / "a" / "my project"
    two = tmp_path / "b" / "my project"
    one.mkdir(parents=True)
    two.mkdir(parents=True)

    store = SessionStore(one)
    transcript = store.create()

    assert store.directory.parent == tmp_path / "from-env" / "sessions"
    assert store.directory.name.startswith("my_project-")
    assert transcript.path.parent == store.directory
    assert workspace_key(one) == workspace_key(tmp_path / "a" / ".." / "a" / "my project")
    assert workspace_key(one) != workspace_key(two)
    assert SessionStore(two).list() == []
    explicit = SessionStore(one, tmp_path / "explicit")
    assert explicit.directory.parent == tmp_path / "explicit" / "sessions"


def test_session_ids_sort_by_creation_time(root: Path, state: Path) -> None:
    store = SessionStore(root, state)
    ids = [store.create().session_id for _ in range(3)]

    assert all(len(i) == len("20261130-164501-ab12cd") for i in ids)
    assert len(set(ids)) == 3
    assert [i[:15] for i in ids] == sorted(i[:15] for i in ids)


def test_concurrent_appends_from_threads_never_interleave(root: Path, state: Path) -> None:
    transcript = SessionStore(root, state).create()
    big = "x" * 20_000

    def writer(n: int) -> None:
        for i in range(50):
            transcript.append({"type": "event", "kind": "usage", "writer": n, "i": i, "pad": big})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    records = transcript.records()
    assert transcript.warnings == []
    assert len(records) == 1 + 8 * 50
    for n in range(8):
        assert [r["i"] for r in records if r.get("writer") == n] == list(range(50))


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from lsp_agent.session.store import SessionStore

    store = SessionStore(Path(sys.argv[1]), Path(sys.argv[2]))
    transcript = store.create()
    print(transcript.session_id, flush=True)
    pad = "y" * 50_000
    i = 0
    while True:
        message = {"role": "user", "content": f"prompt {i}\\n{pad}"}
        transcript.append({"type": "message", "turn": i, "message": message})
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_server_killed_with_sigkill_loses_nothing_it_had_written(root: Path, state: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(state)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert child.stdout is not None
    try:
        session_id = child.stdout.readline().strip()
        acknowledged = -1
        while acknowledged < 40:
            line = child.stdout.readline()
            assert line, "the child stopped before writing enough"
            acknowledged = int(line)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()

    resumed = SessionStore(root, state).open(session_id)
    history = resumed.messages()

    # Every append that returned is there, in order; at most the one in flight is cut.
    numbers = [int(m["content"].split("\n")[0].split()[1]) for m in history]
    assert numbers == list(range(len(numbers)))
    assert len(numbers) >= acknowledged + 1
    assert len(resumed.warnings) <= 1
    assert all(json.loads(line) for line in resumed.path.read_bytes().splitlines()[:-1])
    prompt(resumed, 999, "after the crash")
    assert resumed.messages()[-1]["content"] == "after the crash"
