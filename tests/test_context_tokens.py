"""Token accounting: the last measured prompt, plus bytes ÷ 3.5 for what changed since."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lsp_agent.context.tokens import (
    TokenMeter,
    message_bytes,
    request_bytes,
    tokens_between,
)
from lsp_agent.messages import Usage

SYSTEM = {"role": "system", "content": "You are a coding agent."}
USER = {"role": "user", "content": "Fix the parser."}


def test_before_any_measure_the_estimate_is_bytes_over_three_and_a_half() -> None:
    meter = TokenMeter(overhead_tokens=100)
    meter.rebase(request_bytes([SYSTEM, USER]))

    assert meter.context_tokens == -(-2 * request_bytes([SYSTEM, USER]) // 7) + 100
    assert meter.prompt_tokens is None
    assert meter.cached_share is None


def test_after_a_call_only_what_was_added_since_is_estimated() -> None:
    meter = TokenMeter()
    meter.rebase(request_bytes([SYSTEM, USER]))
    meter.measured(Usage(5000, 40, 4200, False))
    answer = {"role": "assistant", "content": "x" * 700}

    meter.added(answer)

    assert meter.context_tokens == 5000 + -(-2 * message_bytes(answer) // 7)
    assert meter.cached_share == 0.84
    assert meter.status() == {
        "contextTokens": meter.context_tokens,
        "promptTokens": 5000,
        "cachedTokens": 4200,
        "cachedShare": 0.84,
    }


def test_a_rewrite_lowers_the_estimate_but_not_below_its_share_of_the_measure() -> None:
    meter = TokenMeter()
    meter.measured(Usage(20_000, 10, None, False), request_bytes=100_000)  # 5 bytes a token

    meter.rebase(96_500)
    assert meter.context_tokens == 20_000 - 700 == 96_500 // 5
    meter.rebase(93_000)
    assert meter.context_tokens == 93_000 // 5, "not 20 000 - 2000: that overshoots"
    meter.rebase(7000)
    assert meter.context_tokens == 7000 // 5

    dense = TokenMeter()
    dense.measured(Usage(50_000, 10, None, False), request_bytes=100_000)  # 2 bytes a token
    dense.rebase(93_000)
    assert dense.context_tokens == 50_000 - 2000, "the larger, safer of the two"


def test_estimates_of_a_view_agree_with_the_meter_that_follows_it() -> None:
    meter = TokenMeter()
    view = [SYSTEM, USER]
    meter.rebase(request_bytes(view))
    meter.measured(Usage(1234, 5, None, True))
    added = {"role": "tool", "tool_call_id": "1", "content": "é" * 999}
    meter.added(added)

    assert meter.estimate([*view, added]) == meter.context_tokens


def test_the_difference_rounds_up_either_way() -> None:
    assert tokens_between(0, 1) == 1
    assert tokens_between(7, 0) == -2
    assert tokens_between(10, 10) == 0
    assert message_bytes({"content": "é"}) == len('{"content": "é"}'.encode())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(codec="utf-8")),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet=st.characters(codec="utf-8"), max_size=5), children)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=5, alphabet=st.characters(codec="utf-8")), json_values))
def test_message_bytes_is_the_size_of_the_json_as_encoded(message: dict[str, Any]) -> None:
    assert message_bytes(message) == len(json.dumps(message, ensure_ascii=False).encode())


def test_a_huge_message_is_measured_exactly() -> None:
    text = 'x = 1\n\t"quoted" \\ é 😀 \x01\n' * 100_000
    message = {"role": "assistant", "content": text}
    assert message_bytes(message) == len(json.dumps(message, ensure_ascii=False).encode())


def test_a_lone_surrogate_is_measured_instead_of_raising() -> None:
    assert message_bytes({"content": "\ud83d"}) == len('{"content": ""}') + 3
