"""The ``jobledger`` commands, options and HTTP routes a Markdown page names, and which of them
do not exist.

What is read, outside HTML comments (hidden setups):

- **commands**: in fenced shell blocks (untagged, ``sh``, ``bash``, ``console``, ``shell``;
  only the ``$ `` lines where the block has any), every ``jobledger`` (or ``…/jobledger``)
  in command position, up to a shell operator; in inline code, a span that starts with
  ``jobledger``, or with a top-level command followed by an option or a lowercase word
  (the pages' shorthand: ``migrate --dry-run``, ``projections rebuild``). The words after
  it are walked through the click app: a word at a group is a subcommand, a ``-x``/``--xyz``
  word an option of the command reached so far (its value skipped), other words arguments.
  ``[--flag]``, ``a|b`` and ``--a/--b`` spellings are read as the options or alternatives
  they stand for; placeholders (``JOB``, ``<name>``, ``…``) are skipped, and after one at a
  group nothing more is checked. A route segment ``pause|resume`` is read likewise.
- **routes**: in any code (fenced or inline), ``GET /path`` (any HTTP method), every
  ``/api/v1/…`` path, the path of a ``http://127.0.0.1:8765/…`` or ``localhost:8765`` URL,
  and an inline span that is a path under one of the app's own top-level segments. A path
  matches a route with as many segments, each equal or a route parameter
  (``/api/v1/jobs/{id}`` matches ``/api/v1/jobs/{job_id:uuid}``); a method must be one the
  route serves.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

SHELL_TAGS = {"", "sh", "bash", "console", "shell", "shell-session", "zsh"}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w-]*)")
INLINE = re.compile(r"(?<!`)(`{1,2})(?!`)(.+?)(?<!`)\1(?!`)")
METHOD_PATH = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE|HEAD)\s+(/[^\s`'\"<>]*)")
API_PATH = re.compile(r"(?<![\w.\-/])(/api/v1/[^\s`'\"<>)\],;]+)")
SERVED_URL = re.compile(r"(?:127\.0\.0\.1|localhost):8765(/[^\s`'\"<>)\],;]*)")
SHELL_OPERATORS = {"&&", "||", ";", "|", "(", ")", "$(", ">", ">>", "<", "&", "2>", "2>&1"}
COMMAND_LEADERS = {"&&", "||", ";", "|", "(", "$(", "sudo", "exec", "time", "nohup", "watch"}


@dataclass(frozen=True)
class Code:
    """A piece of code on a page: one line of a fenced block, or an inline span."""

    line: int
    text: str
    fenced: bool
    tag: str = ""
    prompt_lines_only: bool = False


@dataclass(frozen=True)
class Finding:
    """A name on a page that the CLI or the app does not have."""

    page: str
    line: int
    mention: str
    problem: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.mention!r}: {self.problem}"


def code_of(page: Path) -> Iterator[Code]:
    """The fenced lines and inline spans of ``page``, with their line numbers."""
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    in_comment = False
    while index < len(lines):
        line = lines[index]
        if in_comment or line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line
            index += 1
            continue
        fence = FENCE.match(line)
        if fence:
            closer, tag = fence.group(1), fence.group(2).lower()
            end = index + 1
            while end < len(lines) and not lines[end].lstrip().startswith(closer):
                end += 1
            body = lines[index + 1 : end]
            prompts = any(text.lstrip().startswith("$ ") for text in body)
            for offset, text in enumerate(body, start=index + 2):
                yield Code(offset, text, True, tag, prompts)
            index = end + 1
            continue
        for match in INLINE.finditer(line):
            yield Code(index + 1, match.group(2).strip(), False)
        index += 1


# --- commands ---------------------------------------------------------------------------


def command_mentions(code: Code, top_names: Collection[str] = ()) -> Iterator[list[str]]:
    """The words after each ``jobledger`` in command position in ``code``; and an inline span
    that starts with a top-level command (``top_names``) and names more (``migrate
    --dry-run``, ``projections rebuild``), as the page's shorthand for ``jobledger …``."""
    text = code.text
    if code.fenced:
        if code.tag not in SHELL_TAGS:
            return
        stripped = text.lstrip()
        if code.prompt_lines_only:
            if not stripped.startswith("$ "):
                return
            stripped = stripped[2:]
        tokens = _tokens(stripped)
        for at, token in enumerate(tokens):
            if _is_jobledger(token) and (at == 0 or _leads(tokens[at - 1])):
                yield _until_operator(tokens[at + 1 :])
    else:
        tokens = _tokens(text)
        if tokens and _is_jobledger(tokens[0]):
            yield _until_operator(tokens[1:])
        elif len(tokens) > 1 and tokens[0] in top_names and _shorthand(tokens[1]):
            yield _until_operator(tokens)


def _shorthand(word: str) -> bool:
    """A second word that makes ``name word`` read as a command line: an option, or a
    lowercase word (a subcommand or an argument)."""
    bare = word.strip("[]")
    return bare.startswith("-") or re.fullmatch(r"[a-z][a-z-]*(\|[a-z-]+)*", bare) is not None


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote in a synopsis: plain words will do
        return text.split()


def _is_jobledger(token: str) -> bool:
    return token == "jobledger" or token.endswith("/jobledger")


def _leads(token: str) -> bool:
    return token in COMMAND_LEADERS or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", token) is not None


def _until_operator(tokens: list[str]) -> list[str]:
    words = []
    for token in tokens:
        if token in SHELL_OPERATORS or set(token) <= set(";&|()<>"):
            break
        words.append(token)
    return words


def _placeholder(word: str) -> bool:
    """``JOB``, ``URL``, ``<name>``, ``{id}``, ``…``, ``$VAR``: stands for a value."""
    bare = word.strip("[]")
    return (
        not bare
        or bare[0] in "<{$…"
        or "..." in bare
        or "…" in bare
        or not any(c.islower() for c in bare)
    )


def _option_names(command: click.Command, context: click.Context) -> dict[str, click.Parameter]:
    names: dict[str, click.Parameter] = {}
    for param in command.get_params(context):
        if isinstance(param, click.Option):
            for name in [*param.opts, *param.secondary_opts]:
                names[name] = param
    return names


def _takes_value(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.is_flag and not param.count


def unknown_names(words: list[str], root: click.Command) -> list[str]:
    """What in ``jobledger WORDS`` is not a command or option of ``root`` (empty: all known)."""
    command, path = root, ["jobledger"]
    context = click.Context(root, info_name="jobledger")
    problems = []
    skip_value = False
    for word in (w.rstrip("\\") for w in words):
        if skip_value:
            skip_value = False
            continue
        bare = word.strip("[]")
        if bare.startswith("-") and len(bare) > 1 and not bare.startswith("--="):
            options = _option_names(command, context)
            name = bare.split("=", 1)[0]
            alternatives = re.split(r"[|/]", name)  # ``--a|--b``, ``--a/--b``
            known = [alt for alt in alternatives if alt in options]
            unknown = [alt for alt in alternatives if alt.startswith("-") and alt not in options]
            for alt in unknown:
                problems.append(f"`{' '.join(path)}` has no option {alt}")
            # ``--type T`` and ``[--wait SECONDS]`` skip the value; ``[--type]`` has none here.
            if known and "=" not in bare and not word.endswith("]"):
                skip_value = _takes_value(options[known[0]])
            continue
        if isinstance(command, click.Group):
            if _placeholder(word):
                break  # some command: nothing further can be checked
            found = None
            for alt in bare.split("|"):
                sub = command.get_command(context, alt)
                if sub is None:
                    problems.append(f"`{' '.join(path)}` has no command {alt!r}")
                elif found is None:
                    found = (alt, sub)
            if found is None:
                break
            path.append(found[0])
            command = found[1]
            context = click.Context(command, info_name=found[0], parent=context)
        # else: an argument of the command reached
    return problems


def command_findings(page: Path, root: click.Group, label: str) -> list[Finding]:
    top_names = root.list_commands(click.Context(root))
    findings = []
    for code in code_of(page):
        for words in command_mentions(code, top_names):
            for problem in unknown_names(words, root):
                mention = " ".join(["jobledger", *words])
                findings.append(Finding(label, code.line, mention, problem))
    return findings


# --- routes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    path: str
    methods: frozenset[str]
    mount: bool = False
    """Serves every path under it (static files)."""

    @property
    def segments(self) -> list[str]:
        return [s for s in self.path.split("/") if s]


def route_mentions(code: Code) -> Iterator[tuple[str | None, str]]:
    """``(method or None, path)`` for each route ``code`` names."""
    text = code.text
    seen: set[str] = set()
    for match in METHOD_PATH.finditer(text):
        seen.add(match.group(2))
        yield match.group(1), match.group(2)
    for pattern in (API_PATH, SERVED_URL):
        for match in pattern.finditer(text):
            if match.group(1) not in seen:
                seen.add(match.group(1))
                yield None, match.group(1)


def _clean(path: str) -> str:
    path = re.split(r"[?#]", path, maxsplit=1)[0].rstrip(".,:;!")
    return path.rstrip("/") or "/"


def _doc_placeholder(segment: str) -> bool:
    return segment[0] in "{<:" or not any(c.islower() for c in segment)


def _matches(segments: list[str], route: Route) -> bool:
    wanted = route.segments
    if route.mount:
        return segments[: len(wanted)] == wanted
    if len(segments) != len(wanted):
        return False
    for have, want in zip(segments, wanted, strict=True):
        parameter = want.startswith("{")
        if _doc_placeholder(have) and not parameter:
            return False
        if not parameter and have != want:
            return False
    return True


def unknown_route(method: str | None, path: str, routes: Iterable[Route]) -> str | None:
    """Why ``METHOD path`` names no route of the app (``None``: it names one)."""
    cleaned = _clean(path)
    if "..." in cleaned or "…" in cleaned or "*" in cleaned:
        return None  # a family of routes, not one
    for variant in _variants([s for s in cleaned.split("/") if s]):
        matching = [route for route in routes if _matches(variant, route)]
        shown = "/" + "/".join(variant)
        if not matching:
            return f"no route {shown}"
        if method is not None and not any(method in route.methods for route in matching):
            served = sorted({m for route in matching for m in route.methods})
            return f"{shown} serves {', '.join(served)}, not {method}"
    return None


def _variants(segments: list[str]) -> list[list[str]]:
    """``/queues/{q}/pause|resume``: one path per alternative of each segment."""
    variants: list[list[str]] = [[]]
    for segment in segments:
        variants = [[*v, alt] for v in variants for alt in segment.split("|")]
    return variants


def route_findings(page: Path, routes: list[Route], label: str) -> list[Finding]:
    tops = {route.segments[0] for route in routes if route.segments}
    findings = []
    for code in code_of(page):
        # A route of the reader's own app (``POST /orders`` in an example) is not ours.
        mentions = [
            (method, path)
            for method, path in route_mentions(code)
            if path.strip("/").split("/")[0] in tops
        ]
        if not code.fenced and re.fullmatch(r"/[\w{}<>:.\-/]*", code.text):
            first = code.text.strip("/").split("/")[0]
            if first in tops and all(path != code.text for _, path in mentions):
                mentions.append((None, code.text))
        for method, path in mentions:
            problem = unknown_route(method, path, routes)
            if problem is not None:
                mention = f"{method} {path}" if method else path
                findings.append(Finding(label, code.line, mention, problem))
    return findings
