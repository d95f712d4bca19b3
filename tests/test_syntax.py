"""The syntax guard: an edit that breaks a file is refused; a broken file stays editable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lsp_agent.tools import syntax
from lsp_agent.tools.syntax import check, language_for, problems


@pytest.mark.parametrize(
    ("path", "before", "after", "line"),
    [
        ("app.py", "def f(x):\n    return x\n", "def f(x:\n    return x\n", 1),
        ("data.json", '{\n  "a": 1,\n  "b": 2\n}\n', '{\n  "a": 1\n  "b": 2\n}\n', 2),
        ("index.ts", "let x: number = 1;\n", "let x: number = ;\n", 1),
        ("init.lua", "function f()\n  return 1\nend\n", "function f()\n  return 1\n", 2),
        ("main.rs", "fn main() {\n    let x = 1;\n}\n", "fn main() {\n    let x = ;\n}\n", 2),
        ("Cargo.toml", '[package]\nname = "x"\n', '[package\nname = "x"\n', 1),
        ("conf.yaml", "a: [1, 2]\nb: 3\n", "a: [1, 2\nb: 3\n", 1),
        ("view.tsx", "const a = <div>hi</div>;\n", "const a = <div>hi;\n", 1),
    ],
)
def test_an_edit_that_breaks_the_syntax_is_refused_with_the_line(
    path: str, before: str, after: str, line: int
) -> None:
    assert check(path, before, before) is None
    message = check(path, before, after)
    assert message is not None
    assert f"syntax error in {path} at line {line}" in message
    assert "nothing was changed" in message
    assert f"  line {line}, column " in message


def test_the_message_quotes_the_line_and_names_the_missing_token() -> None:
    message = check("src/app.py", "x = f(1)\n", "x = f(1\ny = 2\n")
    assert message is not None
    assert message.startswith("refused: this change would introduce a Python syntax error in ")
    assert "src/app.py" in message
    assert "x = f(1" in message


def test_a_valid_edit_passes() -> None:
    before = "def f():\n    return 1\n"
    assert check("a.py", before, "def f():\n    return 2\n") is None
    assert check("a.json", "{}", '{"a": [1, 2, {"b": null}]}') is None
    assert check("a.ts", "", "export const f = (x: number): string => `${x}`;\n") is None


def test_errors_that_were_already_there_do_not_block_an_edit_elsewhere() -> None:
    before = "import os\n\ndef broken(:\n    pass\n\nx = 1\n"
    after = "import os\nimport sys\n\ndef broken(:\n    pass\n\nx = 2\n"
    assert problems("python", before)
    assert check("a.py", before, after) is None


def test_a_new_error_in_a_file_that_already_had_one_is_still_refused() -> None:
    before = "def broken(:\n    pass\n\nx = 1\n"
    after = "def broken(:\n    pass\n\nx = (1\n"
    message = check("a.py", before, after)
    assert message is not None
    assert "at line 4" in message
    assert "x = (1" in message


def test_an_edit_that_fixes_an_error_passes() -> None:
    assert check("a.rs", "fn main() { let x = ; }\n", "fn main() { let x = 1; }\n") is None


def test_a_new_file_with_an_error_is_refused() -> None:
    message = check("new.json", None, '{"a": }')
    assert message is not None
    assert "JSON syntax error in new.json at line 1" in message


def test_languages_are_chosen_by_extension_and_unknown_ones_pass() -> None:
    assert language_for("x/Y.PY") == "python"
    assert language_for("a.tsx") == "tsx"
    assert language_for("Makefile") is None
    assert language_for("notes.md") is None
    assert check("notes.md", "# a\n", "# a\n```\nunclosed (\n") is None
    assert check("weird.c", "int main(){}\n", "int main({}\n") is None


def test_columns_count_characters_and_crlf_lines_are_numbered_right() -> None:
    found = problems("python", 'x = 1\r\ny = ["é", )]\r\n')
    assert found
    assert (found[0].line, found[0].column, found[0].unexpected) == (2, 11, ")")


def test_a_parse_over_the_time_budget_lets_the_edit_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(syntax, "TIME_BUDGET_S", 0.0)
    assert check("a.py", "", "x = (\n" * 50_000) is None


def test_a_text_too_large_to_check_cheaply_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syntax, "MAX_BYTES", 10)
    assert check("a.py", "", "def f(:\n    pass\n") is None


def test_tree_sitter_is_not_imported_until_a_check_runs() -> None:
    code = (
        "import sys, lsp_agent.tools.syntax as s\n"
        "print('tree_sitter' in sys.modules)\n"
        "s.check('a.py', '', 'x = 1\\n')\n"
        "print('tree_sitter' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.parametrize(
    "path",
    [
        ".devcontainer/devcontainer.json",
        ".devcontainer.json",
        "tsconfig.json",
        "packages/web/tsconfig.build.json",
        ".vscode/settings.json",
        "notes.jsonc",
        "app.code-workspace",
    ],
)
def test_jsonc_files_take_comments_and_trailing_commas(path: str) -> None:
    after = '{\n  // the image\n  "image": "python:3",\n  /* more */ "ports": [8000, 8001,],\n}\n'
    assert language_for(path) == "jsonc"
    assert check(path, None, after) is None
    message = check(path, None, '{\n  "image": "python:3",,\n}\n')
    assert message is not None
    assert f"JSONC syntax error in {path} at line 2" in message


def test_a_json_file_with_a_comment_is_read_as_jsonc_and_others_stay_strict() -> None:
    assert check("package.json", '{"a": 1}\n', '{"a": 1,}\n') is not None
    before = '{\n  // kept by the tool that reads it\n  "a": 1\n}\n'
    assert language_for("renovate.json", before) == "jsonc"
    assert check("renovate.json", before, before.replace('"a": 1', '"a": 1,')) is None


def test_a_comma_inside_a_string_or_a_comment_is_left_alone() -> None:
    assert check("x.jsonc", None, '{"a": ",}", "b": "x" /* , } */}\n') is None
    assert check("x.jsonc", None, '{"a": [1 2]}\n') is not None


def test_the_next_edit_of_a_large_file_is_parsed_from_the_last_tree() -> None:
    lines = [f"def f{i}(x):\n    return x + {i}\n\n" for i in range(3000)]
    first = "".join(lines)
    second = first.replace("x + 1500\n", "x + 1500 + 1\n")
    third = second.replace("x + 2000\n", "x + (2000\n")
    syntax._TREES.clear()
    assert check("big.py", first, second) is None
    # The tree of `second` is kept: the next check starts from it and finds the same errors
    # as a parse from scratch would.
    assert syntax._TREES.get("python", second) is not None
    incremental = check("big.py", second, third)
    syntax._TREES.clear()
    assert incremental is not None
    assert incremental == check("big.py", second, third)
    assert "at line 6002" in incremental
