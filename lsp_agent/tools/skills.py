"""Skills: task instructions the model loads on demand, and the tools they unlock.

A skill is `.agents/skills/<name>/SKILL.md`: front matter with `name`, `description` and an
optional `tools` list, then the instructions. `discover` finds them; `prompt_section` lists each
by name and description for the system prompt; `SkillLocks` holds one session's lock state: a tool
named by some skill is locked until one of those skills is loaded with `load_skill`, and
`relock_from` recomputes that state from the messages still in the history, so a compaction that
drops the `load_skill` call locks its tools again.

A workspace's SKILL.md is the repository's: it is read only as a regular file inside the
workspace, and only its first `MAX_SKILL_BYTES` (`safety.reading`); a link out, a FIFO or a
device is skipped with one log line.
"""

from __future__ import annotations

import itertools
import json
import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_agent.errors import ToolError
from lsp_agent.safety.reading import Read, Refused, read_confined, read_regular

SKILLS_DIR = Path(".agents") / "skills"
"""Where skills live, under the workspace root (and under the user's home)."""
SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
"""A larger SKILL.md is skipped: it would not fit the context it is loaded into."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(.*)$")


@dataclass(frozen=True)
class Skill:
    """One skill, as found on disk."""

    name: str
    description: str
    tools: tuple[str, ...]
    """Tools this skill unlocks (they stay locked until a skill naming them is loaded)."""
    body: str
    """The instructions after the front matter."""
    path: Path
    """The SKILL.md file."""


@dataclass(frozen=True)
class LoadedSkill:
    """What `load_skill` gives the model."""

    skill: Skill
    unlocked: tuple[str, ...]
    """Tools that were locked and are usable from now on."""

    def text(self) -> str:
        """The tool result: the instructions, marked so `relock_from` recognises them."""
        lines = [f'<skill name="{self.skill.name}">', self.skill.body.strip(), "</skill>"]
        if self.skill.tools:
            lines.append("Tools of this skill, usable now: " + ", ".join(self.skill.tools) + ".")
        return "\n".join(lines)


LOAD_SKILL = "load_skill"
"""The tool's name."""


def load_skill_schema(skills: Sequence[Skill]) -> dict[str, Any]:
    """The `load_skill` tool in OpenAI function format; its `name` enumerates the skills."""
    return {
        "type": "function",
        "function": {
            "name": LOAD_SKILL,
            "description": (
                "Load a skill's instructions (listed in the system prompt by name and "
                "description) before doing a task it covers; it also unlocks the skill's tools."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "The skill's name.",
                        "enum": [skill.name for skill in skills],
                    }
                },
                "required": ["name"],
            },
        },
    }


def discover(
    root: Path, home: Path | None = None, on_problem: Callable[[str], None] | None = None
) -> list[Skill]:
    """The skills of the workspace `root`, and of `home` (the user's) when given, by name.

    A workspace skill hides a user skill of the same name. A SKILL.md that cannot be used (no
    description, a bad name, unreadable, too large) is skipped and `on_problem` hears why.
    """
    report = on_problem or (lambda _message: None)
    found: dict[str, Skill] = {}
    origin: dict[str, Path] = {}
    for base in (root, home):
        if base is None:
            continue
        folder = base / SKILLS_DIR
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            skill_file = entry / SKILL_FILE
            if not os.path.lexists(skill_file):
                continue
            try:
                skill = read_skill(skill_file, within=base if base == root else None)
            except ValueError as error:
                report(f"skill {skill_file} skipped: {error}")
                continue
            if skill.name in found:
                if origin[skill.name] == base:
                    report(f"skill {skill_file} skipped: {skill.name!r} is defined twice")
                continue
            found[skill.name] = skill
            origin[skill.name] = base
    return [found[name] for name in sorted(found)]


def read_skill(path: Path, within: Path | None = None) -> Skill:
    """One SKILL.md; raises ValueError saying what is wrong with it. `within`: the folder it
    must be a regular file of (the workspace), once its symlinks are followed."""
    try:
        found: Read = (
            read_confined(within, path, MAX_SKILL_BYTES)
            if within is not None
            else read_regular(path, MAX_SKILL_BYTES)
        )
        if found.cut:
            raise ValueError(f"larger than {MAX_SKILL_BYTES // 1024} KB")
        text = found.data.decode("utf-8-sig")
    except Refused as refused:
        raise ValueError(str(refused).removesuffix(": not read")) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot be read ({error})") from error
    meta, body = parse_front_matter(text)
    name = meta.get("name") or path.parent.name
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid name {name!r} (letters, digits, '-', '_', '.')")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("no description in the front matter (`description: ...`)")
    tools = meta.get("tools", [])
    if isinstance(tools, str):
        tools = [part.strip() for part in tools.split(",") if part.strip()]
    if not isinstance(tools, list):
        raise ValueError("`tools` must be a list of tool names")
    return Skill(
        name=name,
        description=" ".join(description.split()),
        tools=tuple(dict.fromkeys(str(tool) for tool in tools)),
        body=body,
        path=path,
    )


def parse_front_matter(text: str) -> tuple[dict[str, str | list[str]], str]:
    """The `---` front matter of a Markdown file as a dict, and the text after it.

    A YAML subset, enough for skills: `key: value` (plain or quoted), `key: [a, b]`, a block list
    (`- a` lines under `key:`), and folded or literal block scalars (`key: >` / `key: |`).
    Without front matter the dict is empty and the body is the whole text.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return {}, text
    meta: dict[str, str | list[str]] = {}
    i = 1
    while i < end:
        line = lines[i]
        match = _KEY.match(line)
        i += 1
        if not match or line[:1].isspace():
            continue
        key, raw = match.group(1), match.group(2).strip()
        if raw in (">", "|", ">-", "|-", ">+", "|+"):
            block: list[str] = []
            while i < end and (not lines[i].strip() or lines[i][:1].isspace()):
                block.append(lines[i].strip())
                i += 1
            joiner = " " if raw.startswith(">") else "\n"
            meta[key] = joiner.join(block).strip()
        elif raw == "":
            items: list[str] = []
            while i < end and (not lines[i].strip() or lines[i].lstrip().startswith("- ")):
                if lines[i].strip():
                    items.append(_scalar(lines[i].lstrip()[2:]))
                i += 1
            meta[key] = items if items else ""
        elif raw.startswith("[") and raw.endswith("]"):
            meta[key] = [_scalar(part) for part in _split_flow(raw[1:-1]) if part.strip()]
        else:
            meta[key] = _scalar(raw)
    body = "\n".join(lines[end + 1 :])
    return meta, body.lstrip("\n")


def _split_flow(text: str) -> list[str]:
    """The items of a flow list's inside, commas inside quotes kept."""
    items: list[str] = []
    current = ""
    quote = ""
    for char in text:
        if quote:
            current += char
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
            current += char
        elif char == ",":
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    return items


def _scalar(raw: str) -> str:
    """A YAML scalar: quotes removed, a trailing ` # comment` dropped from a plain one."""
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == '"':
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError:
                return inner
            return decoded if isinstance(decoded, str) else inner
        return inner.replace("''", "'")
    return value.split(" #", 1)[0].rstrip()


def prompt_section(skills: Sequence[Skill]) -> str:
    """The system prompt's list of skills: name and description only; empty without skills."""
    if not skills:
        return ""
    lines = [
        "Skills: instructions for particular tasks, kept out of this prompt until needed. "
        "When the task matches a skill's description, call load_skill with its name first "
        "and follow what it says. If a tool answers that it is locked, load the skill its "
        "answer names, then call the tool again.",
    ]
    lines.extend(f"- {skill.name}: {skill.description}" for skill in skills)
    return "\n".join(lines)


class SkillLocks:
    """One session's skills and which of their tools are locked."""

    def __init__(self, skills: Iterable[Skill], *, never_locked: Iterable[str] = ()) -> None:
        """`never_locked`: tools that stay usable even when a skill names them (the core ones)."""
        self.skills: dict[str, Skill] = {skill.name: skill for skill in skills}
        """The session's skills by name."""
        self.loaded: set[str] = set()
        """Names of the skills loaded and still in the history."""
        self._seen: list[Mapping[str, Any]] = []
        """The messages `relock_from` read last, kept to tell new ones from a rewrite."""
        self._calls: dict[str, str] = {}
        """In those messages: the skill each `load_skill` call (by id) asked for."""
        self._results: dict[str, str] = {}
        """In those messages: each tool result's text, by call id."""
        keep = set(never_locked)
        self._lockers: dict[str, tuple[str, ...]] = {}
        for skill in self.skills.values():
            for tool in skill.tools:
                if tool not in keep:
                    self._lockers[tool] = (*self._lockers.get(tool, ()), skill.name)

    @property
    def locked(self) -> dict[str, tuple[str, ...]]:
        """Each locked tool → the skills that unlock it."""
        return {
            tool: skills
            for tool, skills in self._lockers.items()
            if not any(name in self.loaded for name in skills)
        }

    def locked_by(self, tool: str) -> tuple[str, ...]:
        """The skills to load to use `tool`; empty when it is not locked."""
        skills = self._lockers.get(tool, ())
        if any(name in self.loaded for name in skills):
            return ()
        return skills

    def check(self, tool: str) -> None:
        """Raise the `ToolError` (reason `locked`) a locked tool answers with."""
        skills = self.locked_by(tool)
        if not skills:
            return
        which = " or ".join(repr(name) for name in skills)
        raise ToolError(
            f"{tool} is locked: it belongs to the skill {which}. Call load_skill with "
            f"name {skills[0]!r} first, follow its instructions, then call {tool} again.",
            reason="locked",
        )

    def load_skill(self, name: str) -> LoadedSkill:
        """Load a skill: its instructions for the model, and its tools unlocked."""
        skill = self.skills.get(name.strip())
        if skill is None:
            known = ", ".join(self.skills) or "none"
            raise ToolError(
                f"no skill named {name!r}: the skills of this workspace are {known}",
                reason="unknown_skill",
            )
        before = set(self.locked)
        self.loaded.add(skill.name)
        unlocked = tuple(tool for tool in skill.tools if tool in before)
        return LoadedSkill(skill, unlocked)

    def relock_from(self, messages: Sequence[Mapping[str, Any]]) -> set[str]:
        """Recompute the loaded skills from `messages` (the history as it will be sent).

        A skill counts as loaded while the messages hold a `load_skill` call for it AND that
        call's result still carries the skill's instructions (a result shrunk by strip keeps its
        head, one dropped or compacted away does not). Returns the names that were loaded before
        and are locked again now. Also right for a resumed session: it restores what was loaded.

        Asked before every model call: when `messages` are those of the last call (the same
        objects, in the same places) with more after them, only the new ones are read; a history
        the layers rewrote is read again whole (a thousand messages cost 0.3 ms to read).
        """
        seen = self._seen
        if len(messages) >= len(seen) and all(map(operator.is_, messages, seen)):
            start = len(seen)
        else:
            start = 0
            self._calls, self._results = {}, {}
        calls, results = self._calls, self._results
        for message in itertools.islice(messages, start, None):
            role = message.get("role")
            if role == "assistant":
                for call in message.get("tool_calls") or ():
                    function = call.get("function") or {}
                    if function.get("name") != LOAD_SKILL:
                        continue
                    name = _skill_argument(function.get("arguments"))
                    if name is not None and isinstance(call.get("id"), str):
                        calls[call["id"]] = name
            elif role == "tool" and isinstance(message.get("tool_call_id"), str):
                content = message.get("content")
                if isinstance(content, str):
                    results[message["tool_call_id"]] = content
        self._seen = list(messages)
        loaded = {
            name
            for call_id, name in calls.items()
            if name in self.skills and f'<skill name="{name}">' in results.get(call_id, "")
        }
        relocked = self.loaded - loaded
        self.loaded = loaded
        return relocked


def _skill_argument(arguments: Any) -> str | None:
    """The `name` argument of a load_skill call, or None when it cannot be read."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if isinstance(arguments, Mapping) and isinstance(arguments.get("name"), str):
        return str(arguments["name"]).strip()
    return None
