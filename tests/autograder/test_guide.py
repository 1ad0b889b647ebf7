"""The instructor guide (autograder/README.md) names the command line as it is.

- Every option (`--name`) the guide gives the grader exists in the parser of `python -m autograder`
  (or of `speclab-grade`), and every option that parser has is named in the guide.
- Every subcommand the guide shows (`python -m autograder NAME`) and every `make` target exists.
- An option the guide gives another module (`python -m autograder.audit.cost ... --class-size N`) is in
  that module's source; one it gives another program (`docker run --rm`) is not checked.

Which command an option belongs to: the last command named before it in the same code span (inline or
fenced); with none, the grader. The parser is the one `main()` builds, caught when it is about to parse
(nothing is graded). ARCHITECTURE.md's import rules are also held to test_layout.py's ALLOWED table.
"""
from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "autograder" / "README.md"
GRADER = "autograder"  # the owner of the grader's own options
OTHER_PROGRAMS = ("docker", "podman", "nbgrader", "jupyter", "pip", "sbatch", "kubectl")  # their options are their business

COMMAND = re.compile(r"python -m (?P<module>[\w.]+)|(?<![\w-])(?P<prog>speclab-grade|make|"
                     + "|".join(OTHER_PROGRAMS) + r")(?![\w-])")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
FENCED = re.compile(r"^ *```[^\n]*\n(.*?)^ *```", re.M | re.S)
INLINE = re.compile(r"`([^`]+)`")


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def _caught(run) -> argparse.ArgumentParser:
    """The parser `run()` builds, stopped at its parse_args."""
    def catch(self, *args, **kwargs):
        raise _Parsed(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", catch):
        try:
            run()
        except _Parsed as parsed:
            return parsed.parser
    raise AssertionError(f"{run} parsed no arguments")


def grader_options() -> dict[str, list[tuple[str, ...]]]:
    """Subcommand -> the long option strings of each of its options (-h/--help left out).
    "" is `speclab-grade`, the console command (the grade options without a subcommand)."""
    from autograder import __main__ as cli

    def options(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
        return [tuple(o for o in a.option_strings if o.startswith("--")) for a in parser._actions
                if a.option_strings and not isinstance(a, argparse._HelpAction)]

    top = _caught(lambda: cli.main(["grade", "LAB", "SUBMISSIONS"]))
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = {name: options(sub) for name, sub in subs.items()}
    found[""] = options(_caught(cli.console))
    from autograder.export import cluster  # `cluster` parses its own arguments: its schedulers' options

    nested = next(a for a in cluster.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    found["cluster"] = sorted({o for sub in nested.values() for o in options(sub)})
    return found


def spans(text: str) -> tuple[list[str], str]:
    """(the code spans of a markdown text, fenced blocks whole; the prose outside them)."""
    fenced = FENCED.findall(text)
    rest = FENCED.sub(" ", text)
    return fenced + INLINE.findall(rest), INLINE.sub(" ", rest)


def named_options(text: str) -> dict[str, set[str]]:
    """Owner -> the options the text names. Owner: GRADER, a module run with `python -m`, or a program."""
    code, prose = spans(text)
    found: dict[str, set[str]] = {GRADER: set(OPTION.findall(prose))}
    for span in code:
        commands = list(COMMAND.finditer(span))
        for option in OPTION.finditer(span):
            before = [c for c in commands if c.start() < option.start()]
            owner = GRADER
            if before:
                last = before[-1]
                owner = last["module"] or last["prog"]
                owner = GRADER if owner in ("speclab-grade", "make") else owner
            found.setdefault(owner, set()).add(option.group())
    return found


def named_commands(text: str) -> tuple[set[str], set[str]]:
    """(the subcommands of `python -m autograder` the text shows, the make targets it shows)."""
    code, _ = spans(text)
    joined = "\n".join(code)
    subcommands = set(re.findall(r"python -m autograder +([a-z][\w-]*)", joined))
    targets = set(re.findall(r"(?<![\w-])make +([a-z][\w-]*)(?![\w=-])", joined))
    return subcommands, targets


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def module_source(module: str) -> str | None:
    """The source of a module run with `python -m` (a package's __main__.py), or None outside the project."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__main__.py"):
        if path.is_file():
            return path.read_text()
    return None


def guide_problems(text: str, parser: dict[str, list[tuple[str, ...]]]) -> list[str]:
    """What the text says about the command line that the parser and the project contradict."""
    problems = []
    owned = named_options(text)
    ours = owned.pop(GRADER, set())
    known = {o for options in parser.values() for strings in options for o in strings} | {"--help"}
    problems += [f"{o}: named, but `python -m autograder` has no such option" for o in sorted(ours - known)]
    for strings in sorted({s for options in parser.values() for s in options if s}):
        if not set(strings) & ours:
            problems.append(f"{'/'.join(strings)}: an option of `python -m autograder` the text never names")
    for owner, options in sorted(owned.items()):
        if owner in OTHER_PROGRAMS:
            continue
        source = module_source(owner)
        if source is None:
            problems.append(f"python -m {owner}: no such module in the project")
            continue
        problems += [f"{o}: named for `python -m {owner}`, which has no such option"
                     for o in sorted(options) if f'"{o}"' not in source]
    subcommands, targets = named_commands(text)
    problems += [f"python -m autograder {s}: no such subcommand" for s in sorted(subcommands - set(parser))]
    problems += [f"make {t}: no such target" for t in sorted(targets - make_targets())]
    return problems


@pytest.fixture(scope="module")
def parser() -> dict[str, list[tuple[str, ...]]]:
    return grader_options()


def test_the_parser_is_found_with_its_subcommands(parser):
    assert {"grade", "gradescope", "student-release"} <= set(parser), sorted(parser)
    assert ("--notebook-timeout",) in parser["grade"] and parser[""] == parser["grade"]


def test_the_guide_names_the_command_line_as_it_is(parser):
    assert guide_problems(GUIDE.read_text(), parser) == []


def _all_options(parser) -> str:
    return " ".join(f"`{strings[0]}`" for options in parser.values() for strings in options)


@pytest.mark.parametrize("sample, expected", [
    ("`--wrokers 2`", ["--wrokers: named, but `python -m autograder` has no such option"]),
    ("`make grade LAB=lab1 GRADE_ARGS=\"--studnet alice\"`",
     ["--studnet: named, but `python -m autograder` has no such option"]),
    ("`python -m autograder regrade lab1`", ["python -m autograder regrade: no such subcommand"]),
    ("`make grades LAB=lab1`", ["make grades: no such target"]),
    ("`python -m autograder.audit.cost LAB FOLDER --class-sise 4`",
     ["--class-sise: named for `python -m autograder.audit.cost`, which has no such option"]),
    # right: another module's own option, another program's option, an alias of a grader option
    ("`python -m autograder.audit.cost LAB FOLDER --class-size 4` `docker run --rm IMAGE`"
     " `speclab-grade lab1 DIR --course-root C`", []),
])
def test_a_made_up_name_is_reported(parser, sample, expected):
    assert guide_problems(_all_options(parser) + "\n" + sample, parser) == expected


def test_an_option_the_guide_leaves_out_is_reported(parser):
    text = _all_options(parser).replace("`--unsafe`", "")
    assert guide_problems(text, parser) == ["--unsafe: an option of `python -m autograder` the text never names"]


# ARCHITECTURE.md, "What may import what": one line per wing or wings, `a, b -> c, d` or `-> (nothing)`

def stated_arrows(text: str) -> dict[str, set[str]]:
    section = text[text.index("## What may import what"):]
    block = FENCED.search(section).group(1)
    wing = lambda name: name if name == "speclab" else f"autograder.{name}"  # noqa: E731
    stated: dict[str, set[str]] = {}
    for line in block.splitlines():
        left, right = (side.strip() for side in line.split("->"))
        targets = set() if right == "(nothing)" else {wing(n.strip()) for n in right.split(",")}
        for name in left.split(","):
            assert wing(name.strip()) not in stated, f"{name.strip()} stated twice"
            stated[wing(name.strip())] = targets
    return stated


def allowed_table() -> dict[str, set[str]]:
    """test_layout.py's ALLOWED, read from its source."""
    tree = ast.parse((ROOT / "tests" / "autograder" / "test_layout.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "ALLOWED")
    return {k: set(v) for k, v in ast.literal_eval(node.value).items()}


def test_architecture_states_the_import_rules_the_layout_test_holds():
    assert stated_arrows((ROOT / "ARCHITECTURE.md").read_text()) == allowed_table()


def test_an_arrow_the_layout_test_does_not_allow_is_seen():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    wrong = re.sub(r"^sandbox +-> \(nothing\)$", "sandbox -> speclab", text, count=1, flags=re.M)
    assert wrong != text
    assert stated_arrows(wrong)["autograder.sandbox"] == {"speclab"}
    assert stated_arrows(wrong) != allowed_table()
