"""The server ends promptly however its editor leaves, start-up included (a short version of
`benchmarks/lifecycle.py`, which runs hundreds of rounds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.lifecycle import EXPECTED_CODE, WAYS, one_round, workspace
from tests.editor import server_env

ROUNDS = 8
HANG_GUARD_S = 15.0
"""Far above the server's own bound (2 s): only a server that never ends trips it."""


@pytest.mark.parametrize("way", WAYS)
def test_the_server_ends_when_the_editor_leaves_in_its_first_second(
    tmp_path: Path, way: str
) -> None:
    env = server_env(tmp_path / "state", tmp_path / "home")
    (tmp_path / "home").mkdir()
    for index in range(ROUNDS):
        ended = one_round(workspace(tmp_path, index), way, HANG_GUARD_S, env)
        assert ended.seconds is not None, f"round {index}: the server never ended after {way}"
        if EXPECTED_CODE[way] is not None:
            assert ended.code == EXPECTED_CODE[way], f"round {index}: exit code {ended.code}"
