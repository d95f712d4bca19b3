"""MCP servers from the terminal: `lsp-agent doctor` starts each one for real and says how it
went, `lsp-agent run` shows their calls like the others, and without a server configured the
SDK is never even imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.editor import server_env
from tests.fake_model import ScriptedModel, reply, tool_call

STORY = Path(__file__).with_name("mcp_story_server.py")


def story(marks: Path, *flags: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(STORY), str(marks), *flags]}


def user_servers(home: Path, servers: dict[str, Any]) -> None:
    (home / ".agents").mkdir(parents=True, exist_ok=True)
    (home / ".agents" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir(exist_ok=True)
    state.mkdir(exist_ok=True)
    return {**server_env(state, home), **extra}


def lsp_agent(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_agent", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_doctor_starts_each_server_and_says_why_one_does_not(
    tmp_path: Path, workspace: Path, model: ScriptedModel
) -> None:
    marks = tmp_path / "marks"
    env = environment(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")
    user_servers(
        tmp_path / "home",
        {"story": story(marks), "broken": story(marks, "--fail"), "gone": {"command": "no-such-x"}},
    )
    proposed = {"mcpServers": {"repo": story(tmp_path / "repo-marks")}}
    (workspace / ".mcp.json").write_text(json.dumps(proposed))

    done = lsp_agent("doctor", "--json", env=env, cwd=workspace)

    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["mcp story"]["status"] == "ok"
    assert "starts, 9 tools" in checks["mcp story"]["detail"]
    assert checks["mcp broken"]["status"] == "bad"
    assert "exit status 2" in checks["mcp broken"]["detail"]
    assert "its configuration is missing" in checks["mcp broken"]["detail"]
    assert checks["mcp gone"]["status"] == "bad"
    assert "'no-such-x' is not a program" in checks["mcp gone"]["detail"]
    # A repository's server is not started by doctor either.
    assert checks["mcp repo"]["status"] == "info"
    assert "until you confirm it" in checks["mcp repo"]["detail"]
    assert not (tmp_path / "repo-marks").exists()
    assert done.returncode == 1  # a server that does not start is a failure


def test_run_in_a_terminal_shows_an_mcp_call_as_server_tool_and_arguments(
    tmp_path: Path, workspace: Path, model: ScriptedModel
) -> None:
    marks = tmp_path / "marks"
    env = environment(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")
    user_servers(tmp_path / "home", {"story": story(marks)})
    model.add(tool_call("mcp__story__touch", {"name": "x.txt"}), reply("Could not."))

    done = lsp_agent("run", "make x.txt", "--workspace", str(workspace), env=env, cwd=workspace)

    assert done.returncode == 0, done.stderr
    assert '→ story · touch {"name": "x.txt"}' in done.stderr
    # No terminal to answer the question: nothing ran.
    assert "⊘ mcp__story__touch not run" in done.stderr
    assert not (marks / "x.txt").exists()


SDK_MODULES = """
import asyncio, json, sys
from pathlib import Path
from lsp_agent.agent.sessions import build_agent
from lsp_agent.config import load_settings
from lsp_agent.testing import MemoryPort

async def main() -> None:
    settings, _ = load_settings(json.loads(sys.argv[1]), environ={})
    port = MemoryPort(answer="Allow")
    agent = build_agent(settings, Path(sys.argv[2]), port, state_dir=Path(sys.argv[3]))
    result = await agent.ask("hello")
    await agent.aclose()
    loaded = [m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types", "httpx2")]
    outcome = {"status": result.status, "loaded": sorted(loaded), "warned": port.warned}
    print(json.dumps(outcome))

asyncio.run(main())
"""


def test_without_a_server_configured_a_turn_never_imports_the_sdk(
    tmp_path: Path, workspace: Path, model: ScriptedModel
) -> None:
    env = environment(tmp_path)
    model.add(reply("Hello."), reply("Hello again."))

    def turn(settings: dict[str, Any]) -> dict[str, Any]:
        every = {"baseUrl": model.base_url, "model": "test-model", **settings}
        done = subprocess.run(
            [sys.executable, "-c", SDK_MODULES, json.dumps(every), str(workspace), str(tmp_path)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outcome: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        return outcome

    without = turn({})
    assert without == {"status": "completed", "loaded": [], "warned": []}
    # The control: a server configured, and the same turn loads the SDK to start it.
    with_one = turn({"mcpServers": {"story": story(tmp_path / "marks")}})
    assert with_one["status"] == "completed"
    assert "mcp" in with_one["loaded"]


HIDE_SDK = "import sys\nsys.modules['mcp'] = None  # as if lsp-agent[mcp] were not installed\n"


def test_without_the_sdk_doctor_and_the_model_say_how_to_install_it(
    tmp_path: Path, workspace: Path, model: ScriptedModel
) -> None:
    env = environment(tmp_path, LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model")
    user_servers(tmp_path / "home", {"story": story(tmp_path / "marks")})
    doctor = (
        HIDE_SDK + "from lsp_agent.terminal.cli import main\nsys.exit(main(['doctor', '--json']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", doctor],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    checks = {check["name"]: check for check in json.loads(done.stdout)["checks"]}
    assert checks["mcp"]["status"] == "bad"
    assert "pip install '.[mcp]'" in checks["mcp"]["detail"]

    model.add(reply("I cannot use those tools."))
    settings = {"baseUrl": model.base_url, "model": "test-model"}
    script = HIDE_SDK + SDK_MODULES
    turn = subprocess.run(
        [sys.executable, "-c", script, json.dumps(settings), str(workspace), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert turn.returncode == 0, turn.stderr
    (warned,) = json.loads(turn.stdout.splitlines()[-1])["warned"]  # the user sees it once
    assert "pip install '.[mcp]'" in warned
    told = str(model.requests[0]["messages"][-1]["content"])
    assert "the MCP SDK is not installed" in told
    assert "pip install '.[mcp]'" in told
    assert not (tmp_path / "marks").exists()
