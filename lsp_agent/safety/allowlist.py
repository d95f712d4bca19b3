"""The commands that may run without a question, and how each one's arguments are judged.

A command runs unasked only when every one of these holds:

- its program is on this closed list (`SPECS`, `git` subcommands, a few custom readers), found
  where the shell would find it and not in the workspace (where a command could have put it);
- every option is one the program is known to read without writing or running anything,
  matched by exact name after expanding an unambiguous GNU abbreviation (`options`);
- every path it reads — positional, an option's value, an attached short value, a glob's every
  match — resolves (symlinks followed) inside the workspace (or a spill folder), and is no
  secret (`protected.is_secret_name`);
- a recursive search would meet no secret (`grep -r` over a folder holding `.env` or `.git`),
  and git shows file content (`git log -p`, `git show`, `git diff`) only from a repository
  whose index and history hold no secret-named file.

Everything here is pure apart from looking at the workspace (resolving paths, expanding globs,
walking folders) and one cached git query; no command runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from lsp_agent.safety import readers
from lsp_agent.safety.options import COMMON, Spec, spec
from lsp_agent.safety.paths import (
    Ask,
    Places,
    Situation,
    folder_concern,
    parse_or_ask,
    path_concern,
    program_place,
)

BUILTINS = frozenset({"cd", "echo", "printf", "pwd", "test", "[", "true", "false", ":", "type",
                      "command"})  # fmt: skip
"""Shell builtins on the list: no program file is looked up for them."""


# Globs: bash expands them before the command runs, and so does the judge.


# The specs of the programs on the list.

SPECS: dict[str, Spec] = {
    "ls": spec(
        "-a -A -b -B -c -C -d -D -f -F -g -G -h -H -i -k -l -L -m -n -N -o -p -q -Q -r -R -s -S "
        "-t -u -U -v -x -X -Z -1 -I= -T= -w= --all --almost-all --author --escape --block-size= "
        "--ignore-backups --color=? --colour=? --directory --dired --classify=? --file-type "
        "--format= --full-time --group-directories-first --no-group --human-readable --si "
        "--dereference-command-line --dereference-command-line-symlink-to-dir --hide= "
        "--hyperlink=? --indicator-style= --inode --ignore= --kibibytes --dereference "
        "--numeric-uid-gid --literal --hide-control-chars --show-control-chars --quote-name "
        "--quoting-style= --reverse --recursive --size --sort= --time= --time-style= --tabsize= "
        "--width= --context --zero " + COMMON
    ),
    "cat": spec(
        "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --show-ends --number "
        "--squeeze-blank --show-tabs --show-nonprinting " + COMMON
    ),
    "head": spec(
        "-c= -n= -q -v -z --bytes= --lines= --quiet --silent --verbose --zero-terminated " + COMMON,
        numbers=True,
    ),
    "tail": spec(
        "-c= -n= -q -v -z -s= -f! -F! --bytes= --lines= --quiet --silent --verbose "
        "--zero-terminated --follow! --retry! --pid! --sleep-interval= --max-unchanged-stats= "
        + COMMON,
        numbers=True,
        refused_why="waits for the file to grow, until the command times out",
    ),
    "wc": spec(
        "-c -m -l -L -w --bytes --chars --lines --max-line-length --words --total= "
        "--files0-from! " + COMMON,
        refused_why="reads file names from a file, which lsp-agent cannot check",
    ),
    "grep": spec(
        "-E -F -G -P -e=:pattern -f@:pattern -i -y -v -w -x -c -o -q -s -b -H -h -n -T -Z -z "
        "-a -I -l -L -r:recursive -R:recursive_follow -U -A= -B= -C= -m= -d= -D= "
        "--extended-regexp --fixed-strings --basic-regexp --perl-regexp --regexp=:pattern "
        "--file@:pattern --ignore-case --no-ignore-case --word-regexp --line-regexp "
        "--null-data --no-messages --invert-match --max-count= --byte-offset --line-number "
        "--line-buffered --with-filename --no-filename --label= --only-matching --quiet "
        "--silent --binary-files= --text --directories= --devices= --recursive:recursive "
        "--dereference-recursive:recursive_follow --include=:include --exclude=:exclude "
        "--exclude-from@ --exclude-dir=:exclude_dir --files-without-match "
        "--files-with-matches --count --initial-tab --null --before-context= "
        "--after-context= --context= --group-separator= --no-group-separator --color=? "
        "--colour=? --binary " + COMMON,
        numbers=True,
    ),
    "sort": spec(
        "-b -d -f -g -h -i -M -n -R -r -V -c -C -m -s -u -z -k= -t= -S= -o! -T! "
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
        "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort "
        "--random-source@ --reverse --sort= --version-sort --batch-size= --check=? "
        "--compress-program! --debug --files0-from! --key= --merge --output! --stable "
        "--buffer-size= --field-separator= --temporary-directory! --parallel= --unique "
        "--zero-terminated " + COMMON,
        refused_why="writes files or runs a program",
    ),
    "uniq": spec(
        "-c -d -D -f= -i -s= -u -z -w= --count --repeated --all-repeated=? --skip-fields= "
        "--group=? --ignore-case --skip-chars= --unique --zero-terminated --check-chars= " + COMMON
    ),
    "cut": spec(
        "-b= -c= -d= -f= -n -s -z --bytes= --characters= --delimiter= --fields= --complement "
        "--only-delimited --output-delimiter= --zero-terminated " + COMMON
    ),
    "tr": spec("-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1 " + COMMON),
    "diff": spec(
        "-i -E -Z -b -w -B -I= -a -r:recursive -N -x=:exclude -X@ -S= -q -s -c -C= -u -U= -e -n "
        "-y -W= -t -T -l! -p -F= -d -D= --normal --brief --report-identical-files --context=? "
        "--unified=? --ed --rcs --side-by-side --left-column --suppress-common-lines "
        "--show-c-function --show-function-line= --label= --expand-tabs --initial-tab "
        "--tabsize= --suppress-blank-empty --paginate! --recursive:recursive --no-dereference "
        "--new-file --unidirectional-new-file --ignore-file-name-case "
        "--no-ignore-file-name-case --exclude=:exclude --exclude-from@ --starting-file= "
        "--from-file@ --to-file@ --ignore-case --ignore-tab-expansion --ignore-trailing-space "
        "--ignore-space-change --ignore-all-space --ignore-blank-lines --ignore-matching-lines= "
        "--text --strip-trailing-cr --ifdef= --old-group-format= --new-group-format= "
        "--unchanged-group-format= --changed-group-format= --line-format= "
        "--old-line-format= --new-line-format= --unchanged-line-format= --minimal "
        "--horizon-lines= --speed-large-files --color=? --palette= --width= " + COMMON,
        refused_why="runs a program",
    ),
    "cmp": spec(
        "-b -i= -l -n= -s --print-bytes --ignore-initial= --verbose --bytes= --quiet --silent "
        + COMMON
    ),
    "comm": spec(
        "-1 -2 -3 -z --check-order --nocheck-order --output-delimiter= --total "
        "--zero-terminated " + COMMON
    ),
    "nl": spec(
        "-b= -d= -f= -h= -i= -l= -n= -p -s= -v= -w= --body-numbering= --section-delimiter= "
        "--footer-numbering= --header-numbering= --line-increment= --join-blank-lines= "
        "--number-format= --no-renumber --number-separator= --starting-line-number= "
        "--number-width= " + COMMON
    ),
    "tac": spec("-b -r -s= --before --regex --separator= " + COMMON),
    "rev": spec("-0 --zero -h -V " + COMMON),
    "od": spec(
        "-A= -j= -N= -S=? -t= -v -w=? -a -b -c -d -f -i -l -o -s -x --address-radix= "
        "--endian= --skip-bytes= --read-bytes= --strings=? --format= --output-duplicates "
        "--width=? --traditional " + COMMON
    ),
    "strings": spec(
        "-a -d -f -n= -t= -e= -o -s= -w -U= -T= --all --data --print-file-name --bytes= "
        "--radix= --encoding= --include-all-whitespace --output-separator= --unicode= "
        "--target= " + COMMON
    ),
    "basename": spec("-a -s= -z --multiple --suffix= --zero " + COMMON),
    "dirname": spec("-z --zero " + COMMON),
    "realpath": spec(
        "-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing --logical "
        "--physical --quiet --relative-to@ --relative-base@ --strip --no-symlinks --zero " + COMMON
    ),
    "readlink": spec(
        "-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing --canonicalize-missing "
        "--no-newline --quiet --silent --verbose --zero " + COMMON
    ),
    "stat": spec(
        "-L -f -c= -t --dereference --file-system --cached= --format= --printf= --terse " + COMMON
    ),
    "du": spec(
        "-0 -a -B= -b -c -D -d= -H -h -k -L -l -m -P -S -s -t= -x -X@ --null --all "
        "--apparent-size --block-size= --bytes --total --dereference-args --max-depth= "
        "--files0-from! --human-readable --inodes --dereference --count-links --no-dereference "
        "--separate-dirs --si --summarize --threshold= --time=? --time-style= "
        "--one-file-system --exclude-from@ --exclude= " + COMMON,
        refused_why="reads file names from a file, which lsp-agent cannot check",
    ),
    "df": spec(
        "-a -B= -h -H -i -k -l -P -t= -T -x= --all --block-size= --human-readable --si "
        "--inodes --local --no-sync --output=? --portability --sync --total --type= "
        "--print-type --exclude-type= " + COMMON
    ),
    "paste": spec("-d= -s -z --delimiters= --serial --zero-terminated " + COMMON),
    "fold": spec("-b -s -w= --bytes --spaces --width= " + COMMON),
    "expand": spec("-i -t= --initial --tabs= " + COMMON),
    "unexpand": spec("-a -t= --all --first-only --tabs= " + COMMON),
    "column": spec(
        "-t -s= -o= -c= -x -n -N= -l= -L -R= -H= -W= -O= -E= -d -e -J -r= -T= -i= -p= "
        "--table --separator= --output-separator= --output-width= --fillrows "
        "--table-columns= --table-columns-limit= --table-right= --table-truncate= "
        "--table-wrap= --table-hide= --table-order= --table-noextreme= --table-noheadings "
        "--table-header-repeat --table-name= --json --keep-empty-lines --tree= --tree-id= "
        "--tree-parent= -V -h " + COMMON
    ),
    "md5sum": spec(
        "-b -t -z -l= -c! --binary --text --tag --zero --length= --check! --ignore-missing! "
        "--quiet! --status! --strict! --warn! " + COMMON,
        refused_why="reads file names from a file, which lsp-agent cannot check",
    ),
    "file": spec(
        "-b -c -d -E -e= -F= -f! -h -i -k -l -L -m@ -N -n -0 -p! -P= -r -s -S -v -z -Z -C! "
        "--apple --brief --checking-printout --debug --exclude= --exclude-quiet= --extension "
        "--files-from! --separator= --mime --mime-type --mime-encoding --keep-going --list "
        "--dereference --magic-file@ --no-pad --no-buffer --print0 --preserve-date! "
        "--parameter= --raw --special-files --no-sandbox! --uncompress --uncompress-noreport "
        "--no-dereference --compile! " + COMMON
    ),
    "date": spec(
        "-d= -f@ -I=? -r@ -R -s! -u --date= --debug --file@ --iso-8601=? --resolution "
        "--rfc-email --rfc-3339= --reference@ --set! --utc --universal " + COMMON,
        refused_why="sets the clock",
    ),
    "seq": spec("-f= -s= -w --format= --separator= --equal-width " + COMMON, permute=False),
    "uname": spec(
        "-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release "
        "--kernel-version --machine --processor --hardware-platform --operating-system " + COMMON
    ),
    "id": spec(
        "-a -Z -g -G -n -r -u -z --context --group --groups --name --real --user --zero " + COMMON
    ),
    "printenv": spec("-0 --null " + COMMON),
    "nproc": spec("--all --ignore= " + COMMON),
    "whoami": spec(COMMON),
    "hostname": spec(
        "-a -A -d -f -i -I -s -y --alias --all-fqdns --domain --fqdn --long --ip-address "
        "--all-ip-addresses --short --yp --nis -h -V -b! --boot! -F! --file! " + COMMON
    ),
    "sleep": spec(COMMON, permute=False),
    "xxd": spec(
        "-a -b -C -E -e -i -p -u -r! -R= -d -h -v -c= -g= -l= -n= -o= -s= -ps -autoskip "
        "-bits -capitalize -EBCDIC -include -plain -postscript -revert! -uppercase -version "
        "-help -cols= -groupsize= -len= -name= -seek=",
        abbreviations=False,
        clusters=False,
        refused_why="writes a file",
    ),
    "hexdump": spec(
        "-b -c -C -d -o -x -L=? -e= -f@ -n= -s= -v --one-byte-octal --one-byte-char "
        "--canonical --two-bytes-decimal --two-bytes-octal --two-bytes-hex --color=? "
        "--format= --format-file@ --length= --skip= --no-squeezing " + COMMON
    ),
    "tree": spec(
        "-a -d -l -f -x -L= -R! -P= -I= -o! -i -q -N -Q -p -u -g -s -h -D -F -v -t -c -U -r "
        "-C -n -X -J -H= -T= --gitignore --gitfile@ --matchdirs --metafirst --ignore-case "
        "--noreport --charset= --filelimit= --dirsfirst --filesfirst --du --si --prune --sort= "
        "--timefmt= --info --infofile@ --fromfile! --fromtabfile! --nolinks --hintro! "
        "--houtro! " + COMMON,
        abbreviations=False,
        clusters=False,
        refused_why="writes files",
    ),
}
for _alias in ("sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum"):
    SPECS[_alias] = SPECS["md5sum"]
SPECS["egrep"] = SPECS["grep"]
SPECS["expr"] = spec(COMMON, permute=False)
SPECS["numfmt"] = spec(
    "-d= -z --debug --delimiter= --field= --format= --from= --from-unit= --grouping "
    "--header=? --invalid= --padding= --round= --suffix= --to= --to-unit= --unit-separator= "
    "--zero-terminated " + COMMON,
    permute=False,
)
SPECS["factor"] = spec("-h --exponents " + COMMON)
SPECS["base64"] = spec("-d -i -w= --decode --ignore-garbage --wrap= " + COMMON)
SPECS["base32"] = SPECS["base64"]
SPECS["basenc"] = spec(
    "-d -i -w= --decode --ignore-garbage --wrap= --base64 --base64url --base32 --base32hex "
    "--base16 --base2msbf --base2lsbf --z85 " + COMMON
)
SPECS["cksum"] = spec(
    "-a= -l= -z --algorithm= --base64 --length= --raw --tag --untagged --zero --debug "
    "-c! --check! --ignore-missing! --quiet! --status! --strict! --warn! " + COMMON,
    refused_why="reads file names from a file, which lsp-agent cannot check",
)
SPECS["sum"] = spec("-r -s --sysv " + COMMON)
SPECS["join"] = spec(
    "-a= -e= -i -j= -o= -t= -v= -1= -2= -z --check-order --nocheck-order --header "
    "--ignore-case --zero-terminated " + COMMON
)
SPECS["fmt"] = spec(
    "-c -p= -s -t -u -w= -g= --crown-margin --prefix= --split-only --tagged-paragraph "
    "--uniform-spacing --width= --goal= " + COMMON,
    numbers=True,
)
SPECS["fgrep"] = SPECS["grep"]

# Programs whose positional arguments are never files they read.
_TEXT_ONLY = frozenset(
    {"echo", "printf", "true", "false", ":", "sleep", "seq", "uname", "id", "whoami", "printenv",
     "nproc", "hostname", "basename", "dirname", "tr", "test", "[", "type", "which", "pwd",
     "expr", "numfmt", "factor"}
)  # fmt: skip
# Programs that take at most this many files (a second one would be an output).
_MAX_FILES = {"uniq": 1, "xxd": 1, "hostname": 0, "pwd": 0, "whoami": 0, "nproc": 0,
              "base64": 1, "base32": 1, "basenc": 1}  # fmt: skip
# Programs that only tell what they know about files (names, sizes, counts): allowed as the
# command `xargs` runs with names it reads from its input.
_RESPONSE_FILES = frozenset({"strings"})
"""Programs that read more arguments from `@FILE` (binutils)."""
METADATA_ONLY = frozenset({"wc", "ls", "stat", "du", "file", "basename", "dirname", "echo"})
VERSION_ONLY = frozenset(
    {"python", "python3", "node", "git", "rg", "ruff", "pytest", "cargo", "rustc", "go", "gcc",
     "cc", "clang", "make", "cmake", "java", "javac", "ruby", "perl", "pip", "pip3", "uv",
     "bwrap", "jq", "sed", "awk", "gawk", "grep", "find", "bash"}
)  # fmt: skip
"""Programs whose `--version` (and nothing else) may run unasked."""


def judge(words: list[str], places: Places, situation: Situation) -> str:
    """Why the simple command `words` (expanded) may run unasked; raises `Ask` otherwise."""
    name, args = words[0], words[1:]
    if "/" in name:
        raise Ask(f"{name} is a program given by path, not a command on the read-only list")
    if name == "cd":
        return _cd(args, places, situation)
    if len(args) == 1 and name in VERSION_ONLY and _version_flag(name, args[0]):
        program_place(name, places, situation)
        return "a version query"
    check = _CUSTOM.get(name)
    if check is None and name not in SPECS and name not in _TEXT_ONLY:
        raise Ask(f"{name} is not on the list of read-only commands")
    if name not in BUILTINS:
        program_place(name, places, situation)
    if check is not None:
        return check(name, args, places, situation)
    if name not in SPECS:
        return "read-only command"
    return _judge_by_spec(name, args, places, situation)


def _judge_by_spec(name: str, args: list[str], places: Places, situation: Situation) -> str:
    """Why the listed program `name` may run with `args`, read against its option spec."""
    parsed = parse_or_ask(name, SPECS[name], args)
    for value in parsed.paths():
        path_concern(value, places, situation)
    files = parsed.positionals
    if name in _TEXT_ONLY:
        if len(files) > _MAX_FILES.get(name, len(files)):
            raise Ask(f"{name} takes no such arguments")
        return "read-only command"
    if name in ("grep", "egrep", "fgrep"):
        return readers.grep(name, parsed, places, situation)
    if name in _RESPONSE_FILES and any(value.startswith("@") for value in files):
        raise Ask(f"{name} reads more arguments from a file named after @")
    limit = _MAX_FILES.get(name)
    if limit is not None and len(files) > limit:
        raise Ask(f"{name} with {len(files)} file names writes the last one")
    if "recursive" in parsed.tags:
        excluded = parsed.values("exclude")
        for value in files or ["."]:
            folder_concern(value, places, situation, hidden=True, follow=True, exclude=excluded,
                           exclude_dirs=excluded)  # fmt: skip
    if name == "date":
        if len(files) > 1 or (files and not files[0].startswith("+")):
            raise Ask("date with a date argument sets the clock")
        return "read-only command"
    for value in files:
        path_concern(value, places, situation)
    return "read-only command"


def _version_flag(name: str, flag: str) -> bool:
    if flag == "--version":
        return True
    if flag in ("-V", "-VV"):
        return name in ("python", "python3", "ruff", "pytest", "rg", "jq")
    if flag == "version":
        return name in ("go", "ruff", "uv")
    if flag == "-version":
        return name in ("java", "javac")
    return flag == "-v" and name in ("perl", "node", "gcc", "clang", "cc")


def _cd(args: list[str], places: Places, situation: Situation) -> str:
    if args[:1] == ["--"]:
        args = args[1:]
    if len(args) != 1 or args[0] == "-" or args[0].startswith("-"):
        raise Ask("cd without exactly one folder of the workspace goes elsewhere")
    path_concern(args[0], places, situation, verb="moves to")
    moved = set()
    for cwd in situation.cwds:
        target = Path(args[0]) if os.path.isabs(args[0]) else cwd / args[0]
        moved.add(target.resolve())
    situation.cwds |= moved
    return "moves within the workspace"


# Programs judged by their own readers.


_XARGS = spec(
    "-0 -d= -n= -L= -P= -r -s= -t -x -I= -a@ -E= -p! -o! -i=? -e=? -l=? --null --delimiter= "
    "--max-args= --max-lines= --max-procs= --no-run-if-empty --max-chars= --verbose --exit "
    "--replace=? --arg-file@ --eof=? --interactive! --open-tty! --process-slot-var= "
    "--show-limits " + COMMON,
    permute=False,
    refused_why="talks to the terminal",
)


def _xargs(name: str, args: list[str], places: Places, situation: Situation) -> str:
    parsed = parse_or_ask(name, _XARGS, args)
    for value in parsed.paths():
        path_concern(value, places, situation)
    inner = parsed.positionals or ["echo"]
    if inner[0] not in METADATA_ONLY:
        raise Ask(
            f"xargs runs {inner[0]} on names it reads from its input, which cannot be checked "
            "(only commands that print names, sizes or counts are allowed)"
        )
    judge(inner, places, situation)
    return "counts or lists files named by its input"


_CUSTOM: dict[str, Callable[[str, list[str], Places, Situation], str]] = {
    "rg": readers.rg,
    "sed": readers.sed,
    "awk": readers.awk,
    "gawk": readers.awk,
    "mawk": readers.awk,
    "jq": readers.jq,
    "find": readers.find,
    "xargs": _xargs,
    "pytest": readers.pytest,
    "py.test": readers.pytest,
    "python": readers.python,
    "python3": readers.python,
    "ruff": readers.ruff,
    "printf": readers.printf,
    "echo": readers.echo,
    "command": readers.command_v,
    "env": readers.env,
    "pwd": readers.pwd,
    "which": readers.which,
    "type": readers.echo,
    "git": readers.git,
    "bash": readers.shell,
    "sh": readers.shell,
    "dash": readers.shell,
}
