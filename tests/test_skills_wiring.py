"""Skills wired into a session , through the agent core and an in-memory editor:
the system prompt lists them, a skill's tool is locked until `load_skill`, and a resumed session
keeps what it had loaded."""

from __future__ import annotations

from pathlib import Path

from lsp_agent.testing import MemoryPort
from tests.fake_model import ScriptedModel, ToolCalls, reply, tool_call
from tests.test_agent import make_agent, results

SCAFFOLD = """\
---
name: scaffold
description: Create new modules the way this project lays them out.
tools: [write_file]
---
New modules go under src/ and start with a docstring.
"""


def add_skill(workspace: Path) -> None:
    folder = workspace / ".agents" / "skills" / "scaffold"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SCAFFOLD)


def write_module() -> ToolCalls:
    return tool_call("write_file", {"path": "new_module.py", "content": '"""New."""\n'})


async def test_a_skill_tool_is_locked_until_the_model_loads_the_skill(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    add_skill(workspace)
    port = MemoryPort()
    model.add(
        write_module(),
        tool_call("load_skill", {"name": "scaffold"}),
        write_module(),
        reply("Created."),
    )
    agent = make_agent(workspace, model, port, tmp_path / "state")

    result = await agent.ask("add a module")

    system = model.requests[0]["messages"][0]["content"]
    assert "- scaffold: Create new modules the way this project lays them out." in system
    assert "New modules go under src/" not in system  # the body waits for load_skill
    locked, loaded, created = results(model.requests[-1])
    assert "write_file is locked" in locked
    assert "'scaffold'" in locked
    assert "New modules go under src/ and start with a docstring." in loaded
    assert "created" in created
    assert result.edits.applied == 1
    assert (workspace / "new_module.py").read_text() == '"""New."""\n'


async def test_a_resumed_session_keeps_the_skills_it_had_loaded(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    add_skill(workspace)
    model.add(tool_call("load_skill", {"name": "scaffold"}), reply("Loaded."))
    first = await make_agent(workspace, model, MemoryPort(), tmp_path / "state").ask("prepare")

    model.add(write_module(), reply("Created."))
    again = make_agent(workspace, model, MemoryPort(), tmp_path / "state")
    await again.ask("now add the module", session_id=first.session)

    assert "created" in results(model.requests[-1])[-1]


async def test_without_skills_there_is_no_load_skill_and_nothing_is_locked(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    model.add(tool_call("load_skill", {"name": "scaffold"}), write_module(), reply("ok"))
    agent = make_agent(workspace, model, MemoryPort(), tmp_path / "state")

    await agent.ask("add a module")

    unknown, created = results(model.requests[-1])
    assert "unknown tool 'load_skill'" in unknown
    assert "created" in created
    assert "Skills:" not in model.requests[0]["messages"][0]["content"]
    session = agent.session(None)
    names = [schema["function"]["name"] for schema in session.toolbox.schemas()]
    assert "load_skill" not in names


async def test_the_toolbox_offers_load_skill_naming_the_skills(
    workspace: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    add_skill(workspace)
    agent = make_agent(workspace, model, MemoryPort(), tmp_path / "state")

    session = agent.new_session()

    (load,) = [s for s in session.toolbox.schemas() if s["function"]["name"] == "load_skill"]
    assert load["function"]["parameters"]["properties"]["name"]["enum"] == ["scaffold"]
