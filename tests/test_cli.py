"""The terminal front end, run as a user would run it: `python -m lsp_agent ...` in a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.editor import server_env
from tests.fake_model import ScriptedModel, reply, tool_call


def lsp_agent(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_agent", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def env_for(tmp_path: Path, **settings: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    return {**server_env(state, home), **settings}


def test_run_with_yes_streams_the_answer_shows_the_diff_and_writes_the_file(
    workspace: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        reply("Shortened the greeting."),
    )
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")

    done = lsp_agent("run", "shorten it", "--workspace", str(workspace), "--yes", env=env)

    assert done.returncode == 0, done.stderr
    assert "Shortened the greeting." in done.stdout
    assert '-    return "hello"' in done.stdout
    assert '+    return "hi"' in done.stdout
    assert "\033[" not in done.stdout  # no colours when stdout is not a terminal
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hi"\n'
    assert "completed" in done.stderr


def test_run_without_a_terminal_to_confirm_leaves_the_file_alone(
    workspace: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hi"'}),
        reply("ok"),
    )
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")

    done = lsp_agent("run", "shorten it", "--workspace", str(workspace), env=env, stdin="")

    assert done.returncode == 0, done.stderr
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'
    told = model.requests[-1]["messages"][-2]["content"]
    assert "rejected" in told
    assert "--yes" in told


def test_run_with_no_endpoint_says_so_in_one_line(tmp_path: Path, unused_port: int) -> None:
    url = f"http://127.0.0.1:{unused_port}/v1"
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=url)

    done = lsp_agent("run", "hi", "--workspace", str(tmp_path), env=env)

    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert line.count(url) == 1, line
    assert "LSP_AGENT_BASE_URL" in line
    assert "LSP_AGENT_MODEL" in line
    assert "Traceback" not in done.stderr


def test_run_with_no_model_names_the_models_the_endpoint_offers(
    tmp_path: Path, model: ScriptedModel
) -> None:
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url)

    done = lsp_agent("run", "hi", "--workspace", str(tmp_path), env=env)

    assert done.returncode != 0
    assert "LSP_AGENT_MODEL" in done.stderr
    assert "test-model" in done.stderr
    assert model.requests == []


def test_run_against_an_endpoint_that_fails_reports_the_error(
    workspace: Path, tmp_path: Path, unused_port: int, model: ScriptedModel
) -> None:
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="no-such-model")

    done = lsp_agent("run", "hi", "--workspace", str(workspace), env=env)

    assert done.returncode == 1
    assert "no-such-model" in done.stderr
    assert "test-model" in done.stderr
    assert "Traceback" not in done.stderr


def test_user_mistakes_get_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    missing = lsp_agent("run", "hi", "--workspace", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"lsp-agent: workspace {tmp_path / 'nope'} is not a folder: pass --workspace DIR"
    ]
    bad_flag = lsp_agent("run", "--colour", env=env)
    assert bad_flag.returncode == 2
    assert "Traceback" not in bad_flag.stderr
    bad_tcp = lsp_agent("serve", "--tcp", "nowhere", env=env)
    assert bad_tcp.returncode == 2
    assert "HOST:PORT" in bad_tcp.stderr


def test_sessions_lists_what_run_stored(
    workspace: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    model.add(reply("Hello!"))
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")
    assert lsp_agent("run", "say hello", "--workspace", str(workspace), env=env).returncode == 0

    listed = lsp_agent("sessions", "--workspace", str(workspace), env=env)

    assert listed.returncode == 0
    (line,) = listed.stdout.strip().splitlines()
    assert "say hello" in line
    assert "1 turns" in line


def test_doctor_checks_the_endpoint_and_shows_where_settings_came_from(tmp_path: Path) -> None:
    secret = "sk-doctor-secret-123456"
    with ScriptedModel(api_key=secret) as model:
        env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")
        env["LSP_AGENT_API_KEY"] = secret

        done = lsp_agent("doctor", env=env)

    assert done.returncode == 0, done.stdout  # the key reached the endpoint, which checks it
    assert "ripgrep" in done.stdout
    assert "git" in done.stdout
    assert "test-model" in done.stdout
    assert "env:LSP_AGENT_MODEL" in done.stdout
    assert secret not in done.stdout
    assert secret not in done.stderr
    assert "codeActions     3: lsp-agent: fix this problem, " in done.stdout  # one line each
    assert "None" not in done.stdout


def test_doctor_says_what_is_not_set(tmp_path: Path, model: ScriptedModel) -> None:
    done = lsp_agent("doctor", env=env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url))
    assert done.returncode == 1
    assert re.search(r"model +not set +\(default\)", done.stdout), done.stdout


def test_doctor_fails_when_the_model_is_not_served(tmp_path: Path, model: ScriptedModel) -> None:
    env = env_for(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="other")
    done = lsp_agent("doctor", env=env)
    assert done.returncode == 1
    assert "other is not listed" in done.stdout
