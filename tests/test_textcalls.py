"""Tool calls written as text by small local models: run when unmistakable, text otherwise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_agent.tools.textcalls import looks_like_tool_call, text_tool_call


def tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


SCHEMAS = [
    tool(
        "read_file",
        {"path": {"type": "string"}, "start": {"type": "integer"}, "limit": {"type": "integer"}},
        ["path"],
    ),
    tool("list_files", {"path": {"type": "string"}, "glob": {"type": "string"}}, []),
    tool(
        "edit_file",
        {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
        ["path", "old", "new"],
    ),
    tool("load_skill", {"name": {"type": "string", "enum": ["deploy"]}}, ["name"]),
    tool(
        "todo",
        {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}, "done": {"type": "boolean"}},
                    "required": ["text"],
                },
            }
        },
        ["items"],
    ),
]
NAMES = [schema["function"]["name"] for schema in SCHEMAS]


def parsed(text: str) -> tuple[str, dict[str, Any]] | None:
    call = text_tool_call(text, SCHEMAS, call_id="text-1")
    if call is None:
        return None
    assert call.id == "text-1"
    return call.name, json.loads(call.arguments)


READ = ("read_file", {"path": "src/app.py"})


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "read_file", "arguments": {"path": "src/app.py"}}',
        '  {"name": "read_file", "arguments": "{\\"path\\": \\"src/app.py\\"}"}\n',
        '{"name": "read_file", "parameters": {"path": "src/app.py"}}',
        '{"tool": "read_file", "args": {"path": "src/app.py"}}',
        '{"tool_name": "read_file", "tool_input": {"path": "src/app.py"}}',
        '{"function": {"name": "read_file", "arguments": {"path": "src/app.py"}}}',
        '{"type": "function", "id": "x", "function": {"name": "read_file",'
        ' "arguments": "{\\"path\\": \\"src/app.py\\"}"}}',
        '{"function": "read_file", "arguments": {"path": "src/app.py"}}',
        '{"read_file": {"path": "src/app.py"}}',
        '[{"name": "read_file", "arguments": {"path": "src/app.py"}}]',
        '{"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}',
        '```json\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n```',
        '```\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n```',
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": {"path": "src/app.py"}}',
        '<tool_call>\n```json\n{"name": "read_file", "arguments": {"path": "src/app.py"}}\n```\n'
        "</tool_call>",
        '<function_call>{"name": "read_file", "arguments": {"path": "src/app.py"}}</function_call>',
        '<think>I should read the file first.</think>\n{"name": "read_file",'
        ' "arguments": {"path": "src/app.py"}}',
    ],
)
def test_the_common_shapes_become_a_tool_call(text: str) -> None:
    assert parsed(text) == READ


def test_a_tool_without_required_arguments_may_omit_them() -> None:
    assert parsed('{"name": "list_files"}') == ("list_files", {})
    assert parsed('{"name": "list_files", "arguments": null}') == ("list_files", {})
    assert parsed('{"name": "list_files", "arguments": ""}') == ("list_files", {})


def test_nested_arguments_are_validated_too() -> None:
    good = '{"name": "todo", "arguments": {"items": [{"text": "a", "done": false}]}}'
    bad = '{"name": "todo", "arguments": {"items": [{"done": false}]}}'
    assert parsed(good) == ("todo", {"items": [{"text": "a", "done": False}]})
    assert parsed(bad) is None


def test_a_tool_named_name_argument_is_not_confused_with_the_tool_name() -> None:
    assert parsed('{"name": "load_skill", "arguments": {"name": "deploy"}}') == (
        "load_skill",
        {"name": "deploy"},
    )
    assert parsed('{"name": "load_skill", "arguments": {"name": "other"}}') is None


def test_unicode_arguments_survive() -> None:
    call = text_tool_call(
        '{"name": "edit_file", "arguments": {"path": "é.py", "old": "«a»", "new": "b"}}',
        SCHEMAS,
        call_id="c",
    )
    assert call is not None
    assert "«a»" in call.arguments


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I will read the file now.",
        'Let me read it: {"name": "read_file", "arguments": {"path": "a"}}',
        '{"name": "read_file", "arguments": {"path": "a"}} and then I will edit it.',
        '{"name": "read_file", "arguments": {"path": "a"}}\n{"name": "read_file", "arguments": {}}',
        '[{"name": "read_file", "arguments": {"path": "a"}}, {"name": "list_files"}]',
        '{"tool_calls": [{"name": "list_files"}, {"name": "list_files"}]}',
        '{"name": "delete_everything", "arguments": {}}',
        '{"name": "read_file", "arguments": {}}',
        '{"name": "read_file", "arguments": {"path": 3}}',
        '{"name": "read_file", "arguments": {"path": "a", "start": "10"}}',
        '{"name": "read_file", "arguments": {"path": "a", "start": true}}',
        '{"name": "read_file", "arguments": {"path": "a"}, "parameters": {"path": "b"}}',
        '{"name": "read_file", "arguments": {"path": "a"}, "reason": "curious"}',
        '{"name": "read_file", "arguments": "not json"}',
        '{"name": "read_file", "arguments": ["a"]}',
        "{'name': 'read_file', 'arguments': {'path': 'a'}}",
        '{"name": "read_file", "arguments": {"path": "a"},}',
        '"read_file"',
        "```python\nprint('hello')\n```",
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>\nDone.',
        '{"path": "src/app.py"}',
    ],
)
def test_anything_ambiguous_or_invalid_stays_text(text: str) -> None:
    assert parsed(text) is None


def test_no_tools_in_the_request_means_no_text_calls() -> None:
    assert (
        text_tool_call('{"name": "read_file", "arguments": {"path": "a"}}', [], call_id="x") is None
    )


@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes(text: str) -> None:
    call = text_tool_call(text, SCHEMAS, call_id="x")
    assert call is None or call.name in NAMES


@given(
    path=st.text(max_size=40),
    wrapper=st.sampled_from(["{}", "```json\n{}\n```", "<tool_call>{}</tool_call>"]),
)
def test_any_valid_path_round_trips_through_every_wrapper(path: str, wrapper: str) -> None:
    body = json.dumps({"name": "read_file", "arguments": {"path": path}})
    assert parsed(wrapper.replace("{}", body, 1)) == ("read_file", {"path": path})


def test_broken_imitations_are_recognised() -> None:
    assert looks_like_tool_call("<tool_call>\nread_file src/app.py\n</tool_call>", NAMES)
    assert looks_like_tool_call('I call {"name": "read_file", "arguments": {"path": "a"}}', NAMES)
    assert looks_like_tool_call('```json\n{"read_file": {"path": "a"\n```', NAMES)
    assert not looks_like_tool_call("The function read_file reads a file.", NAMES)
    assert not looks_like_tool_call('{"name": "Alice"}', NAMES)


def test_a_runaway_reply_is_read_at_its_ends_only() -> None:
    prose = "The quick brown fox jumps over the lazy dog.\n" * 50_000  # 2.25 MB
    call = '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
    assert looks_like_tool_call(prose + call, NAMES)
    assert looks_like_tool_call(call + prose, NAMES)
    assert not looks_like_tool_call(prose + call + prose, NAMES)
    assert not looks_like_tool_call(prose[:150_000] + call + prose[:150_000], NAMES)
    assert looks_like_tool_call(prose[:90_000] + call + prose[:90_000], NAMES)
