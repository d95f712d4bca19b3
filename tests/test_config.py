"""Settings: which source wins, what a bad value does, and that the API key never shows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.config import (
    ANTHROPIC_BASE_URL,
    DEFAULT_BASE_URL,
    Settings,
    load_settings,
    read_env_file,
    require_model,
)
from lsp_agent.errors import UserError

KEY = "sk-live-0123456789abcdef"


def load(
    tmp_path: Path,
    editor: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    env_file: str | None = None,
) -> tuple[Settings, list[str]]:
    """Load with nothing from the real environment or home directory."""
    path = tmp_path / "agents-env"
    if env_file is not None:
        path.write_text(env_file, encoding="utf-8")
    return load_settings(editor, environ=environ or {}, env_file=path)


def test_with_nothing_configured_the_defaults_of_the_design_apply(tmp_path: Path) -> None:
    settings, warnings = load(tmp_path)

    assert warnings == []
    assert settings.base_url == "http://localhost:11434/v1"
    assert settings.model is None
    assert settings.api_key is None
    assert settings.provider == "openai"
    assert settings.context_window == 128_000
    assert (settings.compact_at, settings.compact_to, settings.strip_at) == (0.85, 0.35, 0.5)
    assert (settings.tool_output_cap, settings.stub_chars) == (10_000, 300)
    assert settings.command_timeout == 60
    assert settings.max_turns == 50
    assert settings.mode == "review"
    assert settings.permissions == []
    assert settings.read_only_paths == []
    assert set(settings.sources.values()) == {"default"}
    assert settings == Settings()


@pytest.mark.parametrize(
    ("layers", "model", "source"),
    [
        ({"editor", "env", "file"}, "from-editor", "editor"),
        ({"env", "file"}, "from-env", "env:LSP_AGENT_MODEL"),
        ({"file"}, "from-file", "~/.agents/env"),
        (set(), None, "default"),
    ],
)
def test_the_strongest_source_that_sets_a_value_wins_and_is_recorded(
    tmp_path: Path, layers: set[str], model: str | None, source: str
) -> None:
    editor = {"model": "from-editor"} if "editor" in layers else {}
    environ = {"LSP_AGENT_MODEL": "from-env"} if "env" in layers else {}
    env_file = "LSP_AGENT_MODEL=from-file\n" if "file" in layers else None

    settings, warnings = load(tmp_path, editor, environ, env_file)

    assert warnings == []
    assert settings.model == model
    assert settings.sources["model"] == source
    assert settings.describe()["model"] == {"value": model, "source": source}


def test_each_setting_is_taken_from_its_own_source(tmp_path: Path) -> None:
    settings, _ = load(
        tmp_path,
        editor={"contextWindow": 32_000, "mode": "auto"},
        environ={"COMPACT_AT": "0.9", "LSP_AGENT_MAX_TURNS": "7"},
        env_file="STUB_CHARS=120\nCOMMAND_TIMEOUT=12.5\n",
    )

    assert (settings.context_window, settings.sources["contextWindow"]) == (32_000, "editor")
    assert (settings.mode, settings.sources["mode"]) == ("auto", "editor")
    assert (settings.compact_at, settings.sources["compactAt"]) == (0.9, "env:COMPACT_AT")
    assert (settings.max_turns, settings.sources["maxTurns"]) == (7, "env:LSP_AGENT_MAX_TURNS")
    assert (settings.stub_chars, settings.sources["stubChars"]) == (120, "~/.agents/env")
    assert (settings.command_timeout, settings.sources["commandTimeout"]) == (
        12.5,
        "~/.agents/env",
    )
    assert settings.sources["stripAt"] == "default"


def test_every_environment_variable_of_the_design_is_read(tmp_path: Path) -> None:
    environ = {
        "LSP_AGENT_BASE_URL": "http://gpu-box:8000/v1/",
        "LSP_AGENT_MODEL": "qwen2.5-coder:7b",
        "LSP_AGENT_API_KEY": KEY,
        "LSP_AGENT_PROVIDER": "openai",
        "CONTEXT_WINDOW": "32768",
        "COMPACT_AT": "0.8",
        "COMPACT_TO": "0.3",
        "STRIP_AT": "0.6",
        "TOOL_OUTPUT_CAP": "5000",
        "STUB_CHARS": "100",
        "COMMAND_TIMEOUT": "30",
        "LSP_AGENT_MAX_TURNS": "20",
        "LSP_AGENT_QUESTION_TIMEOUT": "45",
        "LSP_AGENT_COMMAND_MEMORY_MB": "512",
        "LSP_AGENT_COMMAND_FILE_MB": "64",
        "LSP_AGENT_COMMAND_DISK_MB": "128",
    }

    settings, warnings = load(tmp_path, environ=environ)

    assert warnings == []
    assert settings.base_url == "http://gpu-box:8000/v1"  # trailing slash dropped
    assert settings.model == "qwen2.5-coder:7b"
    assert settings.api_key == KEY
    assert settings.context_window == 32768
    assert (settings.compact_at, settings.compact_to, settings.strip_at) == (0.8, 0.3, 0.6)
    assert (settings.tool_output_cap, settings.stub_chars) == (5000, 100)
    assert settings.command_timeout == 30.0
    assert settings.max_turns == 20
    assert (settings.command_memory_mb, settings.command_file_mb, settings.command_disk_mb) == (
        512,
        64,
        128,
    )
    editor_only = {"mode", "permissions", "readOnlyPaths", "codeActions", "prices", "mcpServers"}
    from_env = {name for name, source in settings.sources.items() if source.startswith("env:")}
    assert from_env == set(settings.sources) - editor_only


def test_the_editor_section_may_come_nested_under_lspAgent(tmp_path: Path) -> None:
    flat, _ = load(tmp_path, {"model": "m", "maxTurns": 3})
    nested, _ = load(tmp_path, {"lspAgent": {"model": "m", "maxTurns": 3}})

    assert nested == flat
    assert nested.sources == flat.sources


def test_a_null_or_empty_editor_value_means_not_set(tmp_path: Path) -> None:
    settings, warnings = load(
        tmp_path,
        editor={"model": None, "baseUrl": "", "contextWindow": None},
        environ={"LSP_AGENT_MODEL": "env-model", "CONTEXT_WINDOW": "4096"},
    )

    assert warnings == []
    assert (settings.model, settings.sources["model"]) == ("env-model", "env:LSP_AGENT_MODEL")
    assert settings.base_url == DEFAULT_BASE_URL
    assert settings.context_window == 4096


def test_openai_variables_are_the_fallback_for_the_base_url_and_key(tmp_path: Path) -> None:
    settings, _ = load(
        tmp_path, environ={"OPENAI_BASE_URL": "https://api.openai.com/v1", "OPENAI_API_KEY": KEY}
    )

    assert settings.base_url == "https://api.openai.com/v1"
    assert settings.sources["baseUrl"] == "env:OPENAI_BASE_URL"
    assert settings.api_key == KEY
    assert settings.sources["apiKey"] == "env:OPENAI_API_KEY"


def test_our_own_variables_beat_the_openai_ones(tmp_path: Path) -> None:
    settings, _ = load(
        tmp_path,
        environ={
            "LSP_AGENT_BASE_URL": "http://ours:1/v1",
            "OPENAI_BASE_URL": "http://theirs:2/v1",
            "LSP_AGENT_API_KEY": "ours-key-12345",
            "OPENAI_API_KEY": "theirs-key-12345",
        },
    )

    assert settings.base_url == "http://ours:1/v1"
    assert settings.api_key == "ours-key-12345"


def test_a_real_environment_variable_beats_the_env_file_even_as_a_fallback(
    tmp_path: Path,
) -> None:
    settings, _ = load(
        tmp_path,
        environ={"OPENAI_BASE_URL": "http://from-env/v1"},
        env_file="LSP_AGENT_BASE_URL=http://from-file/v1\n",
    )

    assert (settings.base_url, settings.sources["baseUrl"]) == (
        "http://from-env/v1",
        "env:OPENAI_BASE_URL",
    )


def test_the_anthropic_provider_reads_its_own_key_and_defaults_to_its_api(
    tmp_path: Path,
) -> None:
    settings, warnings = load(
        tmp_path,
        environ={
            "LSP_AGENT_PROVIDER": "anthropic",
            "ANTHROPIC_API_KEY": KEY,
            "OPENAI_API_KEY": "wrong-vendor-key",
            "OPENAI_BASE_URL": "http://wrong-vendor/v1",
        },
    )

    assert warnings == []
    assert settings.provider == "anthropic"
    assert (settings.api_key, settings.sources["apiKey"]) == (KEY, "env:ANTHROPIC_API_KEY")
    assert (settings.base_url, settings.sources["baseUrl"]) == (ANTHROPIC_BASE_URL, "default")


def test_the_openai_provider_does_not_pick_up_an_anthropic_key(tmp_path: Path) -> None:
    settings, _ = load(tmp_path, environ={"ANTHROPIC_API_KEY": KEY})

    assert settings.api_key is None


def test_an_explicit_base_url_stays_with_the_anthropic_provider(tmp_path: Path) -> None:
    settings, _ = load(
        tmp_path, editor={"provider": "anthropic", "baseUrl": "https://proxy.example/anthropic"}
    )

    assert settings.base_url == "https://proxy.example/anthropic"


@pytest.mark.parametrize(
    ("key", "value", "expected_words"),
    [
        ("contextWindow", "lots", "positive whole number"),
        ("contextWindow", True, "positive whole number"),
        ("contextWindow", 1000.5, "positive whole number"),
        ("compactAt", 1.5, "at most 1"),
        ("stripAt", 0, "greater than 0"),
        ("maxTurns", 0, "positive whole number"),
        ("commandTimeout", -1, "positive number of seconds"),
        ("toolOutputCap", "10000", "positive whole number"),
        ("provider", "azure", '"openai" or "anthropic"'),
        ("mode", "yolo", '"review" or "auto"'),
        ("baseUrl", "localhost:11434", "http:// or https://"),
        ("model", 7, "model name"),
        ("readOnlyPaths", "dist/**", "list of glob strings"),
        ("permissions", {"tool": "bash"}, "list of rules"),
    ],
)
def test_a_bad_editor_value_is_ignored_with_a_sentence_and_the_next_source_decides(
    tmp_path: Path, key: str, value: object, expected_words: str
) -> None:
    good, _ = load(tmp_path)

    settings, warnings = load(tmp_path, editor={key: value})

    assert settings == good
    assert settings.sources[key] == "default"
    assert len(warnings) == 1
    assert key in warnings[0]
    assert "from editor" in warnings[0]
    assert expected_words in warnings[0]
    assert warnings[0].endswith(".")


def test_a_bad_editor_value_falls_back_to_the_environment_not_the_default(
    tmp_path: Path,
) -> None:
    settings, warnings = load(
        tmp_path, editor={"contextWindow": "big"}, environ={"CONTEXT_WINDOW": "8192"}
    )

    assert (settings.context_window, settings.sources["contextWindow"]) == (
        8192,
        "env:CONTEXT_WINDOW",
    )
    assert warnings == [
        "Ignoring contextWindow = 'big' from editor: expected a positive whole number of "
        "tokens; using 8192 from env:CONTEXT_WINDOW."
    ]


def test_a_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    settings, warnings = load(tmp_path, environ={"COMPACT_AT": "85%"}, env_file="COMPACT_AT=0.7\n")

    assert (settings.compact_at, settings.sources["compactAt"]) == (0.7, "~/.agents/env")
    assert len(warnings) == 1
    assert "compactAt = '85%' from env:COMPACT_AT" in warnings[0]
    assert "using 0.7 from ~/.agents/env" in warnings[0]


def test_valid_permission_rules_are_kept_and_normalised(tmp_path: Path) -> None:
    rules = [
        {"tool": "bash", "match": "make *", "decision": "Allow"},
        {"tool": "edit_file", "decision": "ask"},
    ]

    settings, warnings = load(tmp_path, editor={"permissions": rules})

    assert warnings == []
    assert settings.permissions == [
        {"tool": "bash", "match": "make *", "decision": "allow"},
        {"tool": "edit_file", "decision": "ask"},
    ]


def test_one_bad_permission_rule_rejects_the_whole_list(tmp_path: Path) -> None:
    # Keeping the good rules alone could let the `allow` answer what the typo'd `deny` should.
    rules = [
        {"tool": "bash", "match": "make *", "decision": "allow"},
        {"tool": "bash", "match": "rm *", "decision": "deney"},
    ]

    settings, warnings = load(tmp_path, editor={"permissions": rules})

    assert settings.permissions == []
    assert len(warnings) == 1
    assert "rule 2 has decision 'deney'" in warnings[0]


@pytest.mark.parametrize(
    ("rule", "detail"),
    [
        ("allow bash", "rule 1 is not an object"),
        ({"match": "ls", "decision": "allow"}, "rule 1 has no tool name"),
        ({"tool": "bash", "match": ["ls"], "decision": "allow"}, "match that is not a string"),
        ({"tool": "bash", "match": "ls"}, "rule 1 has decision None"),
    ],
)
def test_a_malformed_permission_rule_is_named_in_the_warning(
    tmp_path: Path, rule: object, detail: str
) -> None:
    settings, warnings = load(tmp_path, editor={"permissions": [rule]})

    assert settings.permissions == []
    assert len(warnings) == 1
    assert detail in warnings[0]


def test_compact_to_must_stay_below_compact_at(tmp_path: Path) -> None:
    settings, warnings = load(tmp_path, editor={"compactAt": 0.4, "compactTo": 0.6})

    assert (settings.compact_at, settings.compact_to) == (0.85, 0.35)
    assert settings.sources["compactAt"] == settings.sources["compactTo"] == "default"
    assert len(warnings) == 1
    assert "compactTo must be below compactAt" in warnings[0]


def test_a_near_miss_setting_name_from_the_editor_gets_a_hint(tmp_path: Path) -> None:
    settings, warnings = load(
        tmp_path, editor={"baseURL": "http://x/v1", "trace": {"server": "verbose"}}
    )

    assert settings.base_url == DEFAULT_BASE_URL
    assert warnings == [
        "Ignoring unknown setting lspAgent.baseURL from the editor: did you mean lspAgent.baseUrl?"
    ]


def test_settings_that_are_not_an_object_are_ignored_with_a_warning(tmp_path: Path) -> None:
    settings, warnings = load(tmp_path, editor={"lspAgent": ["model", "m"]})

    assert settings.model is None
    assert len(warnings) == 1
    assert "expected an object" in warnings[0]


def test_the_api_key_is_masked_in_describe_and_absent_from_repr(tmp_path: Path) -> None:
    settings, _ = load(tmp_path, environ={"LSP_AGENT_API_KEY": KEY, "LSP_AGENT_MODEL": "m"})

    described = settings.describe()

    assert described["apiKey"] == {
        "value": "set (from env:LSP_AGENT_API_KEY)",
        "source": "env:LSP_AGENT_API_KEY",
    }
    assert KEY not in repr(described)
    assert KEY not in repr(settings)
    assert KEY not in str(settings)
    assert described["model"] == {"value": "m", "source": "env:LSP_AGENT_MODEL"}


def test_describe_says_when_no_key_is_set(tmp_path: Path) -> None:
    settings, _ = load(tmp_path)

    assert settings.describe()["apiKey"] == {"value": None, "source": "default"}


def test_a_bad_api_key_value_is_reported_without_showing_it(tmp_path: Path) -> None:
    settings, warnings = load(
        tmp_path, editor={"apiKey": ["sk-in-a-list-123456"]}, environ={"OPENAI_API_KEY": KEY}
    )

    assert settings.api_key == KEY
    assert len(warnings) == 1
    assert "apiKey" in warnings[0]
    assert "sk-in-a-list-123456" not in warnings[0]
    assert KEY not in warnings[0]


def test_describe_lists_every_setting_in_camel_case(tmp_path: Path) -> None:
    settings, _ = load(tmp_path)

    assert list(settings.describe()) == [
        "baseUrl",
        "model",
        "apiKey",
        "provider",
        "contextWindow",
        "compactAt",
        "compactTo",
        "stripAt",
        "toolOutputCap",
        "stubChars",
        "commandTimeout",
        "questionTimeout",
        "commandMemoryMB",
        "commandFileMB",
        "commandDiskMB",
        "maxTurns",
        "mode",
        "permissions",
        "readOnlyPaths",
        "codeActions",
        "prices",
        "mcpServers",
    ]


def test_without_a_model_ask_fails_with_a_sentence_that_says_how_to_set_it() -> None:
    with pytest.raises(UserError) as raised:
        require_model(Settings())

    assert str(raised.value) == (
        "no model configured: set lspAgent.model in the editor or LSP_AGENT_MODEL in the "
        "environment (e.g. LSP_AGENT_MODEL=qwen2.5-coder:7b for Ollama)"
    )
    assert require_model(Settings(model="llama3")) == "llama3"


def test_the_env_file_is_read_like_a_shell_would(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(
        "# my agent settings\n"
        "\n"
        "export LSP_AGENT_MODEL=qwen2.5-coder:7b\n"
        "LSP_AGENT_API_KEY='sk-single # not a comment'\n"
        'OPENAI_BASE_URL="http://host:1/v1"  # the box under the desk\n'
        "CONTEXT_WINDOW = 32768   # spaces around = are fine\n"
        "URL_WITH_EQUALS=http://x/?a=b\n"
        'ESCAPED="say \\"hi\\""\n'
        "   INDENTED=yes\n"
        "EMPTY=\n",
        encoding="utf-8",
    )

    variables, warnings = read_env_file(path)

    assert warnings == []
    assert variables == {
        "LSP_AGENT_MODEL": "qwen2.5-coder:7b",
        "LSP_AGENT_API_KEY": "sk-single # not a comment",
        "OPENAI_BASE_URL": "http://host:1/v1",
        "CONTEXT_WINDOW": "32768",
        "URL_WITH_EQUALS": "http://x/?a=b",
        "ESCAPED": 'say "hi"',
        "INDENTED": "yes",
        "EMPTY": "",
    }


def test_broken_env_file_lines_are_skipped_with_their_line_number(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(
        "LSP_AGENT_MODEL=good\n"
        "just some words\n"
        "2BAD=x\n"
        'OPENAI_API_KEY="unterminated\n'
        "LSP_AGENT_MODEL=later-wins\n",
        encoding="utf-8",
    )

    variables, warnings = read_env_file(path)

    assert variables == {"LSP_AGENT_MODEL": "later-wins"}
    assert [w.split(":")[0] for w in warnings] == [
        f"Ignoring line 2 of {path}",
        f"Ignoring line 3 of {path}",
        f"Ignoring line 4 of {path}",
    ]
    assert "no closing" in warnings[2]
    assert "unterminated" not in warnings[2]  # the value may be a key: never echo it


def test_a_missing_env_file_is_fine_and_an_unreadable_one_is_reported(tmp_path: Path) -> None:
    assert read_env_file(tmp_path / "absent") == ({}, [])

    variables, warnings = read_env_file(tmp_path)  # a directory, not a file

    assert variables == {}
    assert len(warnings) == 1
    assert "Could not read" in warnings[0]


def test_env_file_warnings_reach_the_caller_of_load_settings(tmp_path: Path) -> None:
    settings, warnings = load(tmp_path, env_file="LSP_AGENT_MODEL=m\nnonsense\n")

    assert settings.model == "m"
    assert len(warnings) == 1
    assert "line 2" in warnings[0]


def test_a_key_from_the_environment_is_bound_to_the_url_the_environment_gives(
    tmp_path: Path,
) -> None:
    environ = {"LSP_AGENT_API_KEY": KEY, "LSP_AGENT_BASE_URL": "https://models.example/v1"}
    plain, _ = load(tmp_path, environ=environ)
    moved, _ = load(tmp_path, {"baseUrl": "https://elsewhere.example/v1"}, environ=environ)

    assert plain.key_endpoint == "https://models.example/v1" == plain.base_url
    assert moved.base_url == "https://elsewhere.example/v1"
    assert moved.key_endpoint == "https://models.example/v1"  # where the key was set for


def test_a_provider_named_by_the_editor_does_not_move_a_key_set_for_another_vendor(
    tmp_path: Path,
) -> None:
    environ = {"LSP_AGENT_API_KEY": KEY, "OPENAI_BASE_URL": "https://api.openai.com/v1"}
    settings, _ = load(tmp_path, {"provider": "anthropic"}, environ=environ)

    assert settings.base_url == "https://api.anthropic.com"
    assert settings.key_endpoint == "https://api.openai.com/v1"


def test_a_key_from_the_env_file_is_bound_to_the_env_file_s_url_not_the_environment_s(
    tmp_path: Path,
) -> None:
    env_file = tmp_path / "env"
    env_file.write_text(f"LSP_AGENT_API_KEY={KEY}\nLSP_AGENT_BASE_URL=https://mine.example/v1\n")
    settings, _ = load_settings(
        None, environ={"LSP_AGENT_BASE_URL": "https://other.example/v1"}, env_file=env_file
    )
    assert settings.base_url == "https://other.example/v1"
    assert settings.key_endpoint == "https://mine.example/v1"


def test_a_key_from_the_editor_is_bound_to_nothing_until_the_user_says_so(
    tmp_path: Path,
) -> None:
    settings, _ = load(tmp_path, {"apiKey": KEY, "baseUrl": "https://models.example/v1"})
    assert settings.key_endpoint is None
    assert load(tmp_path)[0].key_endpoint is None  # no key, nothing bound


def test_the_env_file_is_not_read_when_it_is_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "env")
    settings, warnings = load_settings(None, environ={}, env_file=tmp_path / "env")
    assert settings.api_key is None
    assert len(warnings) == 1
    assert "not a regular file" in warnings[0]


def test_a_vendor_s_own_key_variable_is_bound_to_that_vendor_s_endpoint(tmp_path: Path) -> None:
    environ = {"ANTHROPIC_API_KEY": KEY}
    settings, _ = load(tmp_path, {"provider": "anthropic"}, environ=environ)

    assert settings.sources["apiKey"] == "env:ANTHROPIC_API_KEY"
    assert settings.key_endpoint == settings.base_url == "https://api.anthropic.com"
