"""The `todo` tool: the model writes its plan, a bad plan gets a message that says what to send."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lsp_agent.errors import ToolError
from lsp_agent.model.anthropic import to_anthropic
from lsp_agent.tools.todo import MAX_ITEMS, TODO_SCHEMA, Plan, TodoItem, parse_items
from tests.test_context_history import ANTHROPIC, OPENAI


def items(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"text": text, "status": status} for text, status in pairs]


def test_a_plan_replaces_the_previous_one_and_is_echoed() -> None:
    plan = Plan()
    plan.replace({"items": items(("Read the parser", "pending"))})

    result = plan.replace(
        {"items": items(("Read the parser", "done"), ("Fix the off-by-one", "in_progress"))}
    )

    assert plan.items == (
        TodoItem("Read the parser", "done"),
        TodoItem("Fix the off-by-one", "in_progress"),
    )
    assert result == "Plan updated:\n[x] Read the parser\n[~] Fix the off-by-one"


def test_an_empty_list_clears_the_plan() -> None:
    plan = Plan((TodoItem("old", "pending"),))

    assert plan.replace({"items": []}) == "The plan is cleared."
    assert plan.items == ()


def test_the_words_models_use_for_a_status_are_understood() -> None:
    parsed = parse_items(items(("a", "completed"), ("b", "In Progress"), ("c", "todo")))

    assert [item.status for item in parsed] == ["done", "in_progress", "pending"]


def test_a_list_sent_as_json_text_is_accepted() -> None:
    assert parse_items(json.dumps(items(("a", "pending")))) == (TodoItem("a", "pending"),)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({}, "todo needs `items`"),
        ({"items": "make it work"}, "not text"),
        ({"items": {"text": "a", "status": "pending"}}, "not an object"),
        ({"items": ["just a string"]}, "item 1 must be an object {text, status}, not text"),
        ({"items": [{"status": "pending"}]}, "item 1 needs a non-empty `text`"),
        ({"items": [{"text": "  ", "status": "pending"}]}, "item 1 needs a non-empty `text`"),
        (
            {"items": [{"text": "a", "status": "blocked"}]},
            "item 1 has status 'blocked': use one of",
        ),
        ({"items": [{"text": "a"}]}, "item 1 has status missing"),
        ({"items": items(("a", "done"), ("A", "pending"))}, "item 2 repeats an earlier item"),
        ({"items": [{"text": "x" * 400, "status": "done"}]}, "keep each under 300"),
        (
            {"items": [{"text": f"step {n}", "status": "pending"} for n in range(MAX_ITEMS + 1)]},
            f"keep it to {MAX_ITEMS} or fewer",
        ),
    ],
)
def test_a_bad_plan_is_refused_with_what_to_send(arguments: dict[str, Any], says: str) -> None:
    plan = Plan((TodoItem("keep me", "in_progress"),))

    with pytest.raises(ToolError) as raised:
        plan.replace(arguments)

    assert says in raised.value.message
    assert '"status": "in_progress"' in raised.value.message, "an example of a valid call"
    assert raised.value.reason == "bad_arguments"
    assert plan.items == (TodoItem("keep me", "in_progress"),), "the plan is unchanged"


def test_a_resumed_session_gets_its_plan_back_from_the_history() -> None:
    def call(arguments: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "todo", "arguments": arguments},
                }
            ],
        }

    history = [
        {"role": "system", "content": "s"},
        call(json.dumps({"items": items(("first plan", "pending"))})),
        call(json.dumps({"items": items(("second plan", "in_progress"))})),
        call('{"items": [{"text": "broken"'),
        {"role": "assistant", "content": "done"},
    ]

    assert Plan.from_history(history).items == (TodoItem("second plan", "in_progress"),)
    assert Plan.from_history(history[:1]).items == ()


def test_the_schema_is_a_tool_a_picky_endpoint_accepts() -> None:
    assert TODO_SCHEMA["function"]["name"] == "todo"
    assert TODO_SCHEMA["function"]["parameters"]["required"] == ["items"]
    status = TODO_SCHEMA["function"]["parameters"]["properties"]["items"]["items"]
    assert status["properties"]["status"]["enum"] == ["pending", "in_progress", "done"]
    messages = [{"role": "user", "content": "plan it"}]
    OPENAI._validate({"model": "test-model", "messages": messages, "tools": [TODO_SCHEMA]})
    anthropic = to_anthropic(messages, [TODO_SCHEMA])
    ANTHROPIC._validate({"model": "test-model", "max_tokens": 1, **anthropic})
    assert anthropic["tools"][0]["input_schema"] == TODO_SCHEMA["function"]["parameters"]
