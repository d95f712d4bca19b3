"""The commands of the read-only list that need more than their options checked: search tools
(`grep`, `rg`, `find`), text processors whose programs could write or run (`sed`, `awk`, `jq`),
test and lint runners whose configuration could write (`pytest`, `ruff`), `python` (version
only), small builtins, and `git` (`gitcheck.py`). Each returns why the command may run unasked,
or raises `Ask`.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from pathlib import Path

from lsp_agent.safety import options as opt
from lsp_agent.safety.gitcheck import judge_git
from lsp_agent.safety.options import COMMON, Parsed, Refusal, spec
from lsp_agent.safety.paths import (
    Ask,
    Places,
    Situation,
    folder_concern,
    parse_or_ask,
    path_concern,
    whitelisted,
)
from lsp_agent.safety.protected import ScannedFolder
from lsp_agent.safety.reading import CONFIG_BYTES, Refused, read_regular


def grep(name: str, parsed: Parsed, places: Places, situation: Situation) -> str:
    files = list(parsed.positionals)
    if "pattern" not in parsed.tags:
        if not files:
            raise Ask(f"{name} without a pattern")
        files = files[1:]  # the first positional is the pattern
    recursive = parsed.tags & {"recursive", "recursive_follow"}
    for option, value in parsed.options:
        if option.name in ("-d", "--directories") and value == "recurse":
            recursive = {"recursive"}
    if recursive:
        # With --include as well, the last glob that matches a name decides: an exclusion is
        # trusted only when nothing can include the name again.
        excluded = [] if parsed.values("include") else parsed.values("exclude")
        for value in files or ["."]:
            folder_concern(
                value,
                places,
                situation,
                hidden=True,
                follow="recursive_follow" in recursive,
                exclude=excluded,
                exclude_dirs=parsed.values("exclude_dir"),
            )
        return "read-only search"
    for value in files:
        path_concern(value, places, situation)
    return "read-only search"


_RG = spec(
    "-e=:pattern -f@:pattern -i -s -S -F -x -w -v -c -l -n -N -o -q -b -H -I -p -0 -z! -a -U "
    "-A= -B= -C= -m= -M= -j= -E= -r= -d= -t=:type -T= -g=:glob -L:follow -u:hidden -.:hidden "
    "--regexp=:pattern --file@:pattern --ignore-case --case-sensitive --smart-case "
    "--fixed-strings --line-regexp --word-regexp --invert-match --count --count-matches "
    "--files-with-matches --files-without-match --line-number --no-line-number "
    "--only-matching --quiet --byte-offset --with-filename --no-filename --no-heading "
    "--heading --pretty --null --null-data --text --multiline --multiline-dotall "
    "--after-context= --before-context= --context= --max-count= --max-columns= "
    "--max-columns-preview --max-depth= --maxdepth= --max-filesize= --threads= --encoding= "
    "--replace= --sort= --sortr= --type=:type --type-not= --glob=:glob --iglob=:glob "
    "--follow:follow --hidden:hidden --no-hidden --no-ignore:hidden --no-ignore-vcs:hidden "
    "--no-ignore-dot:hidden --no-ignore-global:hidden --no-ignore-parent:hidden "
    "--no-ignore-exclude:hidden --no-ignore-files:hidden --ignore-file@:hidden "
    "--unrestricted:hidden --files --type-list --color= --colors= --column --no-column "
    "--json --vimgrep --trim --crlf --no-config --no-messages --no-require-git "
    "--one-file-system --line-buffered --block-buffered --stats --debug --trace "
    "--passthru --include-zero --no-unicode --pcre2 --engine= --auto-hybrid-regex "
    "--field-context-separator= --field-match-separator= --context-separator= "
    "--no-context-separator --path-separator= --dfa-size-limit= --regex-size-limit= "
    "--binary --no-binary --ignore-file-case-insensitive --search-zip! "
    "--pre! --pre-glob! --type-add! --type-clear! --hostname-bin! --hyperlink-format= "
    "--mmap --no-mmap --no-ignore-messages --no-pcre2-unicode --generate= "
    "--sort-files " + COMMON,
    abbreviations=False,
    refused_why="runs programs (decompressors, preprocessors) or changes what ripgrep searches",
)


def rg(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = parse_or_ask(name, _RG, args)
    for value in parsed.paths():
        path_concern(value, places, situation)
    files = list(parsed.positionals)
    listing = any(option.name in ("--files", "--type-list") for option, _ in parsed.options)
    if "pattern" not in parsed.tags and not listing:
        if not files:
            raise Ask("rg without a pattern")
        files = files[1:]
    globs = parsed.values("glob")
    # A later glob wins over an earlier one: exclusions are trusted only with no inclusion.
    exclusions = [glob[1:] for glob in globs if glob.startswith("!")]
    if any(not glob.startswith("!") for glob in globs):
        exclusions = []
    # A glob or a type given to ripgrep also selects hidden files; one that only selects source
    # files by their extension reaches no secret.
    narrow = [glob for glob in globs if not glob.startswith("!")]
    hidden = "hidden" in parsed.tags
    hidden = hidden or not all(_source_glob(glob) for glob in narrow)
    hidden = hidden or not all(kind in _SOURCE_TYPES for kind in parsed.values("type"))
    follow = "follow" in parsed.tags
    for value in files or ["."]:
        path_concern(value, places, situation)
        if listing:
            continue
        searches_hidden = hidden or whitelisted(value, places, situation)
        if searches_hidden or follow or narrow:
            folder_concern(
                value,
                places,
                situation,
                hidden=searches_hidden,
                follow=follow,
                exclude=exclusions,
                exclude_dirs=exclusions,
                only=() if searches_hidden else narrow,
            )
    return "read-only search"


_SOURCE_EXTENSIONS = frozenset(
    {"py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "go", "rs", "rb", "java", "kt", "c",
     "h", "cc", "cpp", "hpp", "cs", "swift", "php", "lua", "md", "rst", "html", "css", "scss",
     "vue", "svelte", "sql", "ex", "exs", "scala", "dart", "zig", "hs", "ml", "txt"}
)  # fmt: skip


_SOURCE_TYPES = frozenset(
    {"py", "js", "ts", "go", "rust", "ruby", "java", "kotlin", "c", "cpp", "cs", "swift", "php",
     "lua", "md", "markdown", "rst", "html", "css", "vue", "svelte", "sql", "elixir", "scala",
     "dart", "zig", "haskell", "ocaml"}
)  # fmt: skip


_SOURCE_GLOB = re.compile(r"(?:[\w.-]+/)*(?:\*\*/)?\*\.(\w+)")


def _source_glob(glob: str) -> bool:
    """Whether a ripgrep glob selects only source files by extension (`*.py`, `src/**/*.ts`)."""
    match = _SOURCE_GLOB.fullmatch(glob)
    return match is not None and match.group(1).lower() in _SOURCE_EXTENSIONS


_SED = spec(
    "-n:quiet -e=:script -f! -i! -E -r -s -u -z -l= --quiet:quiet --silent:quiet "
    "--expression=:script --file! --in-place! --follow-symlinks --line-length= --null-data "
    "--zero-terminated --posix --regexp-extended --separate --sandbox --unbuffered --debug "
    + COMMON,
    refused_why="can edit files in place or run a script file",
)


_SED_ADDRESS = r"(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/I?)"


_SED_PRINT = re.compile(
    rf"\s*(?:{_SED_ADDRESS}(?:\s*,\s*(?:{_SED_ADDRESS}|[+~]\d+))?\s*!?)?\s*[pl=]\s*"
)


def sed(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = parse_or_ask(name, _SED, args)
    if "quiet" not in parsed.tags:
        raise Ask("sed is allowed only as sed -n (printing lines)")
    scripts = parsed.values("script")
    files = list(parsed.positionals)
    if not scripts:
        if not files:
            raise Ask("sed without a script")
        scripts, files = [files[0]], files[1:]
    for script in scripts:
        for command in script.replace("\n", ";").split(";"):
            if command.strip() and not _SED_PRINT.fullmatch(command):
                raise Ask(f"sed script {script!r} does more than print lines")
    for value in files:
        path_concern(value, places, situation)
    return "prints lines"


_AWK_SPECIAL = re.compile(r"\b(ARGV|ARGC|ENVIRON|PROCINFO|FILENAME)\b")


_AWK_UNSAFE = re.compile(r"\b(system|getline|close|fflush)\b|@|\||>(?!=)")


def awk(name: str, args: list[str], places: Places, situation: Situation) -> str:
    program: str | None = None
    files: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if program is None and arg in ("-F", "-v") and rest:
            value = rest.pop(0)
            if arg == "-v":
                _awk_assignment(value)
            continue
        if program is None and arg.startswith(("-F", "-v")) and len(arg) > 2:
            if arg.startswith("-v"):
                _awk_assignment(arg[2:])
            continue
        if program is None and arg == "--":
            continue
        if program is None and arg.startswith("-"):
            raise Ask(f"{name} {arg} is not an option lsp-agent knows to be read-only")
        if program is None:
            program = arg
            continue
        files.append(arg)
    if program is None:
        raise Ask(f"{name} without a program")
    code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', program)
    if _AWK_UNSAFE.search(code.replace("||", " ")) or _AWK_SPECIAL.search(code):
        raise Ask(f"the {name} program may run commands, write files or read other files")
    for value in files:
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", value):
            _awk_assignment(value)
            continue
        path_concern(value, places, situation)
    return "prints from files"


def _awk_assignment(value: str) -> None:
    name = value.split("=", 1)[0]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or _AWK_SPECIAL.fullmatch(name):
        raise Ask(f"awk assignment {value!r} changes what awk reads")


_JQ = spec(
    "-n -r -j -a -c -s -e -S -C -M -R -h -V --tab --indent= --seq --stream --stream-errors "
    "--null-input --raw-input --slurp --raw-output --raw-output0 --join-output "
    "--ascii-output --compact-output --color-output --monochrome-output --sort-keys "
    "--exit-status --unbuffered -f! --from-file! -L! --library-path! " + COMMON,
    abbreviations=False,
    refused_why="reads a program or modules from files",
)


def jq(name: str, args: list[str], places: Places, situation: Situation) -> str:
    plain: list[str] = []
    files: list[str] = []
    index = 0
    named_args = False
    while index < len(args):
        arg = args[index]
        if arg in ("--arg", "--argjson"):
            index += 3
            continue
        if arg in ("--slurpfile", "--rawfile"):
            if index + 2 >= len(args):
                raise Ask(f"jq {arg} is missing its values")
            files.append(args[index + 2])
            index += 3
            continue
        if arg in ("--args", "--jsonargs"):
            named_args = True
            index += 1
            continue
        if named_args and not arg.startswith("-") and any(not p.startswith("-") for p in plain):
            index += 1  # a value for $ARGS, not a file
            continue
        plain.append(arg)
        index += 1
    parsed = parse_or_ask(name, _JQ, plain)
    positionals = list(parsed.positionals)
    if not positionals:
        raise Ask("jq without a filter")
    program, inputs = positionals[0], positionals[1:]
    if re.search(r"\b(import|include|modulemeta|get_search_list|input_filename)\b", program):
        raise Ask("the jq filter reads modules or other files")
    for value in [*files, *inputs]:
        path_concern(value, places, situation)
    return "read-only command"


_FIND_FLAGS = frozenset(
    {"-depth", "-d", "-ignore_readdir_race", "-noignore_readdir_race", "-mount", "-xdev",
     "-noleaf", "-follow", "-daystart", "-print", "-print0", "-prune", "-quit", "-ls", "-true",
     "-false", "-empty", "-executable", "-readable", "-writable", "-nouser", "-nogroup",
     "-not", "!", "-a", "-and", "-o", "-or", "(", ")", ",", "-help", "--help", "-version",
     "--version"}
)  # fmt: skip


_FIND_VALUES = frozenset(
    {"-maxdepth", "-mindepth", "-name", "-iname", "-path", "-ipath", "-wholename",
     "-iwholename", "-regex", "-iregex", "-regextype", "-type", "-xtype", "-size", "-perm",
     "-user", "-group", "-uid", "-gid", "-links", "-inum", "-mtime", "-mmin", "-atime", "-amin",
     "-ctime", "-cmin", "-used", "-newer", "-anewer", "-cnewer", "-samefile", "-lname",
     "-ilname", "-fstype", "-printf", "-context"}
)  # fmt: skip


_FIND_REFUSED = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
     "-fls", "-files0-from"}
)  # fmt: skip


def find(name: str, args: list[str], places: Places, situation: Situation) -> str:
    rest = list(args)
    while rest and rest[0] in ("-H", "-L", "-P"):
        rest.pop(0)
    if rest and (rest[0].startswith("-D") or rest[0].startswith("-O")):
        raise Ask(f"find {rest[0]} is not an option lsp-agent knows to be read-only")
    starts: list[str] = []
    while rest and not (rest[0].startswith("-") or rest[0] in ("(", ")", "!", ",")):
        starts.append(rest.pop(0))
    while rest:
        word = rest.pop(0)
        if word in _FIND_REFUSED:
            raise Ask(f"find {word} can write files or run programs")
        if word in _FIND_FLAGS:
            continue
        if word in _FIND_VALUES or re.fullmatch(r"-newer[aBcmt][aBcmt]", word):
            if not rest:
                raise Ask(f"find {word} is missing its value")
            rest.pop(0)
            continue
        raise Ask(f"find {word} is not a predicate lsp-agent knows to be read-only")
    for value in starts or ["."]:
        path_concern(value, places, situation, verb="lists")
    return "lists files"


_PYTEST = spec(
    "-q -v -x -s -l -r= -k= -m= -p=:plugin -W= -n= -h -V --quiet --verbose --verbosity= "
    "--exitfirst --maxfail= --tb= --showlocals --full-trace --capture= --lf --last-failed "
    "--ff --failed-first --nf --new-first --sw --stepwise --sw-skip --stepwise-skip "
    "--last-failed-no-failures= --co --collect-only --durations= --durations-min= "
    "--no-header --no-summary --disable-warnings --disable-pytest-warnings --strict-markers "
    "--strict-config --color= --code-highlight= --runxfail --setup-show --setup-only "
    "--setup-plan --fixtures --fixtures-per-test --markers --deselect@ --ignore@ "
    "--ignore-glob= --continue-on-collection-errors --doctest-modules --doctest-glob= "
    "--doctest-continue-on-failure --doctest-report= --import-mode= --cache-clear "
    "--cache-show=? --timeout= --dist= --assert= --show-capture= --log-level= "
    "--log-cli-level= --log-format= --log-date-format= --no-cov --keep-duplicates "
    "--basetemp! --junitxml! --junit-xml! --junit-prefix! --result-log! --log-file! "
    "--log-file-level! --log-file-format! --log-file-date-format! --debug! -o! "
    "--override-ini! -c! --config-file! --rootdir! --confcutdir! --pdb! --pdbcls! --trace! "
    "--pastebin! --pyargs! --cov! --cov-report! --cov-config! --html! --self-contained-html! "
    "--json-report! --report-log! --inifile! --noconftest " + COMMON,
    abbreviations=False,
    refused_why="writes files, reads another configuration or runs code lsp-agent cannot see",
)


def pytest(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = parse_or_ask(name, _PYTEST, args)
    for plugin in parsed.values("plugin"):
        if not plugin.startswith("no:"):
            raise Ask(f"pytest -p {plugin} loads a plugin lsp-agent cannot see")
    for value in parsed.paths():
        path_concern(value.split("::", 1)[0], places, situation)
    for value in parsed.positionals:
        if value.startswith("@"):
            raise Ask(f"pytest {value} reads more arguments from a file")
        path_concern(value.split("::", 1)[0], places, situation)
    _pytest_config_options(places)
    situation.wrote = True
    return "runs the project's tests"


_PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


_ADDOPTS = re.compile(r"^[ \t]*addopts[ \t]*=[ \t]*(.*(?:\n[ \t]+.*)*)", re.MULTILINE)


def _pytest_config_options(places: Places) -> None:
    """Raise `Ask` when a pytest configuration that may apply adds options (`addopts`) that
    are not run unasked on the command line (`--basetemp`, `--junitxml`, `-p plugin` …)."""
    if places.scanner is None:
        raise Ask("pytest may take options from the project's configuration, unchecked here")
    configs = [folder / name for folder in places.root.parents for name in _PYTEST_CONFIGS]

    def visit(path: str, seen: ScannedFolder) -> bool:
        configs.extend(Path(path, name) for name in seen.configs if name in _PYTEST_CONFIGS)
        return False

    if not places.scanner.walk(places.root, visit):
        raise Ask("pytest may take options from the project's configuration, too many to check")
    for config in configs:
        text = _config_text(config, "pytest")
        if text is None:
            continue
        for match in _ADDOPTS.finditer(text):
            value = match.group(1)
            quoted = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'', value)
            words = [word for pair in quoted for word in pair if word] if quoted else []
            words = words or value.split()
            try:
                parsed = opt.parse("pytest", _PYTEST, words)
            except Refusal as refusal:
                raise Ask(f"{config.name} adds options to pytest: {refusal}") from None
            if any(not p.startswith("no:") for p in parsed.values("plugin")):
                raise Ask(f"{config.name} makes pytest load a plugin lsp-agent cannot see")


def python(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args[:2] == ["-m", "pytest"]:
        return pytest("pytest", args[2:], places, situation)
    raise Ask(f"{name} runs code (only `{name} -m pytest` and `{name} --version` run unasked)")


_RUFF_CHECK = spec(
    "--no-fix:no_fix --diff --show-fixes --no-show-fixes --statistics --output-format= "
    "--target-version= --preview --no-preview --select= --ignore= --extend-select= "
    "--extend-ignore= --per-file-ignores= --extend-per-file-ignores= --fixable= "
    "--unfixable= --extend-fixable= --exclude= --extend-exclude= --respect-gitignore "
    "--no-respect-gitignore --force-exclude --no-force-exclude -n --no-cache "
    "--stdin-filename= -e --exit-zero --exit-non-zero-on-fix --line-length= "
    "--dummy-variable-rgx= --isolated:isolated -q --quiet -v --verbose -s --silent "
    "--ignore-noqa --show-files --show-settings --no-unsafe-fixes -h --help "
    "--fix! --unsafe-fixes! --fix-only! -w! --watch! -o! --output-file! --cache-dir! "
    "--config! --add-noqa!",
    abbreviations=False,
    clusters=False,
    refused_why="changes files or reads another configuration",
)


_RUFF_FORMAT = spec(
    "--check:check --diff:check --no-cache -n --target-version= --preview --no-preview "
    "--exclude= --extend-exclude= --force-exclude --no-force-exclude --line-length= "
    "--respect-gitignore --no-respect-gitignore --isolated -q --quiet -v --verbose -s "
    "--silent -h --help --range= --stdin-filename= --exit-non-zero-on-format "
    "--config! --cache-dir!",
    abbreviations=False,
    clusters=False,
    refused_why="reads another configuration or writes files",
)


_RUFF_CONFIGS = ("pyproject.toml", "ruff.toml", ".ruff.toml")


_RUFF_FIX = re.compile(r"^\s*(fix|unsafe-fixes|extend)\s*=", re.MULTILINE)


def ruff(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args[:1] == ["format"]:
        parsed = parse_or_ask("ruff format", _RUFF_FORMAT, args[1:])
        if "check" not in parsed.tags:
            raise Ask("ruff format rewrites files (only --check or --diff run unasked)")
    elif args[:1] == ["check"]:
        parsed = parse_or_ask("ruff check", _RUFF_CHECK, args[1:])
        if not parsed.tags & {"no_fix", "isolated"}:
            _ruff_config_fixes(places)
    else:
        raise Ask("ruff runs unasked only as `ruff check` or `ruff format --check`")
    for value in parsed.positionals:
        path_concern(value, places, situation)
    return "checks the code"


def _ruff_config_fixes(places: Places) -> None:
    """Raise `Ask` when a ruff configuration that applies could turn fixing on."""
    configs: list[Path] = []
    for folder in (places.root, *places.root.parents):
        configs += [folder / name for name in ("pyproject.toml", "ruff.toml", ".ruff.toml")]
    user = Path(os.environ.get("XDG_CONFIG_HOME") or places.home / ".config") / "ruff"
    configs += [user / "ruff.toml", user / "pyproject.toml", user / ".ruff.toml"]
    if places.scanner is None:
        raise Ask("ruff check may fix files as its configuration says: add --no-fix")

    def visit(path: str, seen: ScannedFolder) -> bool:
        configs.extend(Path(path, name) for name in seen.configs if name in _RUFF_CONFIGS)
        return False

    if not places.scanner.walk(places.root, visit):
        raise Ask("ruff check may fix files as its configuration says: add --no-fix")
    for config in configs:
        text = _config_text(config, "ruff check")
        if text is None:
            continue
        if _RUFF_FIX.search(text):
            raise Ask(
                f"ruff check may fix files ({config.name} sets fix or extends another "
                "configuration): add --no-fix"
            )


def _config_text(config: Path, program: str) -> str | None:
    """The text of a configuration file `program` may read; None when there is none. Raises
    `Ask` when it is there but not a plain file lsp-agent can read whole (a FIFO, a device,
    larger than any real configuration): the program would read what lsp-agent could not."""
    try:
        found = read_regular(config, CONFIG_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise Ask(f"{program} reads {config.name}, which lsp-agent cannot read") from None
    except Refused as refused:
        raise Ask(f"{program} reads {refused}") from None
    if found.cut:
        raise Ask(f"{program} reads {config.name}, larger than lsp-agent reads of a configuration")
    return found.data.decode("utf-8", errors="replace")


def printf(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args and args[0].startswith("-v"):
        raise Ask("printf -v sets a shell variable, which changes what later commands do")
    return "prints only its arguments"


def echo(name: str, args: list[str], places: Places, situation: Situation) -> str:
    return "prints only its arguments"


def command_v(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args[:1] in (["-v"], ["-V"]):
        return "tells where a command is"
    raise Ask(f"{name} runs another command")


def env(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if args in ([], ["-0"], ["--null"]):
        return "prints the environment"
    raise Ask("env runs another command or changes the environment")


def pwd(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if all(arg in ("-L", "-P") for arg in args):
        return "prints the folder"
    raise Ask("pwd takes no such arguments")


def which(name: str, args: list[str], places: Places, situation: Situation) -> str:
    if all(not arg.startswith("-") or arg in ("-a", "-s") for arg in args):
        return "tells where a command is"
    raise Ask(f"{name} {args[0]} is not an option lsp-agent knows")


_SHELL_FLAGS = frozenset("celuvx")
"""Single-letter options of `bash`/`sh` that change nothing a command could use: `-c` (run the
string), `-l` (a login shell: the user's own profile), `-e`, `-u`, `-v`, `-x`."""
_SHELL_LONG = frozenset({"--login", "--noprofile", "--norc", "--posix", "--noediting"})
_SHELL_SET = frozenset({"pipefail", "errexit", "nounset", "xtrace", "verbose", "posix"})
"""Values of `-o`/`+o` that change nothing a command could use."""
_SHELL_VALUED = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def shell_command_string(args: Sequence[str]) -> tuple[str | None, bool]:
    """What `bash ARGS` (or `sh`) runs as a command line: the string `-c` names, alone or in a
    cluster (`-lc`, `-ec`); None for a script file or standard input. And whether the call is
    plain: only options known to change nothing, and no words after the string (which would
    become `$0`, `$1`…)."""
    plain = True
    run_string = False
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word == "--":
            break
        if word in ("-", "+") or not word.startswith(("-", "+")):
            rest.insert(0, word)
            break
        if word in _SHELL_VALUED:
            value = rest.pop(0) if rest else ""
            plain = plain and word in ("-o", "+o") and value in _SHELL_SET
            continue
        if word.startswith("--"):
            plain = plain and word in _SHELL_LONG
            continue
        letters = word[1:]
        run_string = run_string or "c" in letters
        if "o" in letters or "O" in letters:
            rest.pop(0) if rest else None
            plain = False
        plain = plain and word[0] == "-" and set(letters) <= _SHELL_FLAGS
    if not run_string or not rest:
        return None, False
    return rest[0], plain and len(rest) == 1


def shell(name: str, args: list[str], places: Places, situation: Situation) -> str:
    """`bash -c STRING`, `sh -c`, `bash -lc`: the string's commands are decided on their own
    (`permissions`), as if they were written on the line; the shell itself adds nothing."""
    script, plain = shell_command_string(args)
    if script is None:
        raise Ask(f"{name} runs a script file or commands it reads, which cannot be checked")
    if not plain:
        raise Ask(
            f"{name} with these options or arguments may run other code (an rc file, "
            "positional parameters)"
        )
    return "runs its command string, decided on its own"


def git(name: str, args: list[str], places: Places, situation: Situation) -> str:
    try:
        return judge_git(args, places, situation)
    except Refusal as refusal:
        raise Ask(str(refusal)) from None
