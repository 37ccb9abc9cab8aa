"""The command line's grammar: every subcommand, its options, its --help text and its exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tapetui

__all__ = ["Command", "VersionAction", "parser", "version"]

Command = Callable[[argparse.Namespace], int]
"""What runs a subcommand: the parsed arguments in, the exit code out."""

_EXITS = {
    "check": "0 every session matches; 1 findings (drift, misses, unused steps, contract changes, stale or "
    "unfinished runs, pending candidates); 2 bad input or no tapes found",
    "diff": "0 no differences; 1 differences; 2 bad input",
    "default": "0 done; 2 bad input, or nothing was changed because of an error (the message says which)",
    "stats": "0 done; 2 bad input (no such tape, a malformed line: the message says which)",
    "pending": "0 done; 2 bad input (the message says which)",
    "scrub": "0 done; 1 (--dry-run) something would be removed; 2 bad input or a session could not be scrubbed",
    "accept": "0 done; 2 bad input, or (--all) a candidate that could not be accepted (the others are)",
    "replay": "the replay command's own exit code; 2 no replay_command, or it cannot be run",
    "recover": "0 done (or nothing to do); 2 an interrupted change could not be finished (left in place, said why)",
    "mcp": "as its subcommand's: tapetui mcp serve --help, tapetui mcp verify --help",
    "serve": "0 the client left (a summary goes to stderr); 2 bad input (no such tape, a tool line that is not MCP)",
    "import": "0 done; 2 bad input (a file that is not OTLP JSON, a span without its ids: the message names the "
    "file and line)",
    "export": "0 done; 2 bad input (no such tape, a malformed line)",
    "verify": "0 the server matches the tape; 1 differences (a contract changed, a tool is gone, with --calls a "
    "result differs); 2 bad input, or the server could not be started or did not answer",
}


_CONFIG_HELP = "tapes.toml to use (default: the nearest one above the current folder)"


def _common() -> argparse.ArgumentParser:
    """Options every subcommand takes as well as the top level: ``tapetui check --config X`` is
    ``tapetui --config X check`` (SUPPRESS: a subcommand without it keeps the top level's)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help=_CONFIG_HELP)
    return common


_COMMON = _common()


def _sub(sub: Any, name: str, summary: str, details: str = "") -> argparse.ArgumentParser:
    """A subcommand whose --help page has a description and its exit codes."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        parents=[_COMMON],
        help=summary,
        description=summary[0].upper() + summary[1:] + "." + (f"\n\n{details}" if details else ""),
        epilog=f"exit codes: {_EXITS.get(name, _EXITS['default'])}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def version() -> str:
    """tapetui's version (pyproject.toml reads it from ``tapetui.__version__`` too: no lookup in site-packages)."""
    return tapetui.__version__


class VersionAction(argparse.Action):
    """``--version``: argparse's own, with the version looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(f"tapetui {version()}\n")  # on stdout, as argparse's own action writes it
        parser.exit()


def parse(ap: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``ap.parse_args(argv)``, except that an argument the command does not take is said with that command's usage
    (``tapetui check --bogus`` shows check's options, not the list of commands)."""
    args, extra = ap.parse_known_args(argv)
    if extra:
        target = ap
        while True:
            subs = [a for a in target._actions if isinstance(a, argparse._SubParsersAction)]
            name = getattr(args, subs[0].dest, None) if subs else None
            if name is None:
                break
            target = subs[0].choices[name]
        target.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def parser(commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    """The subcommands' parser; ``commands`` maps each name to the function that runs it."""
    ap = argparse.ArgumentParser(
        prog="tapetui",
        description="Record, replay and review agent tool calls. `tapetui [DIR]` opens the app on a tapes "
        "folder; a folder named like a command opens with a path: `tapetui ./undo`.",
    )
    ap.add_argument("--config", help=_CONFIG_HELP)
    ap.add_argument("--version", action=VersionAction)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    json_help = "one JSON document on stdout (for scripts)"
    tape_help = "a session: its name in the tapes folder (folder/name), or a path to its golden"
    p = _sub(
        sub,
        "check",
        "replay findings and pending candidates of every session; exit 1 on any finding",
        "Reads every golden, its latest run log and its candidate. A run log older than the golden, a run\n"
        "that was killed or ended in an error, and a hand-edited call are findings too.",
    )
    p.add_argument("dir", nargs="?", help="tapes folder (default: tapes.toml's, else ./tapes, else .)")
    p.add_argument("--json", action="store_true", help=json_help + " (the same as --format json)")
    p.add_argument(
        "--jobs",
        default="auto",
        metavar="N",
        help="processes to check in: a number, or auto (default: one below 500 sessions, else every core)",
    )
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="check shard K of N only (sessions split by a hash of their names: the same on every CI runner)",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="REPORT",
        help="combine every shard's --json report into one verdict and exit code (a missing shard fails)",
    )
    p.add_argument(
        "--require-run",
        action="store_true",
        help="a golden with no run log is a finding: every session must have been replayed (a test deleted or "
        "skipped leaves its tape unreplayed, and green)",
    )
    p.add_argument(
        "--format",
        choices=["text", "json", "junit", "github", "markdown"],
        help="text (default); json; junit (JUnit XML, a testcase per session); github (Actions annotations on the "
        "tape's line of each finding); markdown (a job summary for $GITHUB_STEP_SUMMARY)",
    )
    p.add_argument(
        "--samples",
        nargs="?",
        const="folder",
        metavar="N",
        help="count repeated samples per session: without N, its NAME.samples/ folder and pending candidate; "
        "with N, run tapes.toml's record_command N times per session first. Reports 'k of n samples match' "
        "per dimension and pass^k; fewer matching than [compare] samples_required is a finding",
    )
    p.add_argument(
        "--sample",
        action="append",
        metavar="FILE",
        type=Path,
        help="a candidate or run log (*.run.jsonl) to count as a sample of its session (repeatable)",
    )
    p.set_defaults(fn=commands["check"])
    p = _sub(sub, "diff", "compare a golden with its candidate, run log, or another tape")
    p.add_argument("a", help=tape_help)
    p.add_argument("b", nargs="?", help="candidate, run log or tape (default: A's candidate, else its run log)")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(fn=commands["diff"])
    p = _sub(sub, "stats", "counts per session: steps, tools, side effects, expiry, the last run")
    p.add_argument("target", nargs="?", help="a session or a folder (default: the tapes folder)")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(fn=commands["stats"])
    p = _sub(sub, "pending", "list candidates waiting for review (and older ones a newer recording displaced)")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(fn=commands["pending"])
    p = _sub(
        sub,
        "accept",
        "promote a candidate to golden, with a rationale in the changelog",
        "The golden never changes without its changelog entry; a crash at any point leaves the old\n"
        "golden, or the new one with its entry.",
    )
    p.add_argument("tape", nargs="?", help=tape_help + " (not with --all)")
    p.add_argument("--why", help="the rationale, written to the changelog (required)")
    p.add_argument(
        "--all",
        action="store_true",
        help="accept every pending candidate whole (the app's A), or those --filter matches",
    )
    p.add_argument(
        "--filter",
        metavar="FILTER",
        help="with --all: the app's / filter: tool:NAME, model:NAME, "
        "status:drift|contract|miss|stale|unused|pending|error, or any part of a session's name",
    )
    p.add_argument(
        "--step",
        type=int,
        action="append",
        metavar="N",
        help="accept only golden step N, where the sequences line up (repeatable)",
    )
    p.add_argument(
        "--rule",
        action="append",
        metavar="KIND:PATH[=VALUE]",
        help="also add a comparison rule for this session to tapes.toml (repeatable): ignore:result.debug, "
        "tolerance:result.price=0.01 (or =2%%), unordered:PATH, regex:PATH=RE, similarity:PATH=0.8, judge:PATH; "
        "prefix the path with TOOL: to scope it to one tool. Without a pending candidate only the rule is added",
    )
    p.set_defaults(fn=commands["accept"])
    p = _sub(sub, "reject", "discard a candidate")
    p.add_argument("tape", help=tape_help)
    p.add_argument("--why", help="note the reason in the changelog")
    p.set_defaults(fn=commands["reject"])
    p = _sub(
        sub,
        "expire",
        "mark entries expired so the next fill re-records them",
        "Entries that have expired already are left as they are (exit 0, nothing written).",
    )
    p.add_argument("tape", help=tape_help)
    p.add_argument("--step", type=int, action="append", metavar="N", help="expire step N (repeatable)")
    p.add_argument(
        "--all-time-sensitive", action="store_true", help="expire every entry that has an expiry (tools with a ttl)"
    )
    p.add_argument("--why", help="note the reason in the changelog")
    p.set_defaults(fn=commands["expire"])
    p = _sub(
        sub,
        "undo",
        "revert the newest accept, reject or expire of a session (the app's u), from any process",
        "The golden and candidate get back the exact bytes they had before it (kept under .tapetui/history/\n"
        "in the project folder, the last 20 changes per session); the undo is a changelog entry naming the\n"
        "entry it reverts. Run it again to revert the change before.",
    )
    p.add_argument("tape", help=tape_help)
    p.set_defaults(fn=commands["undo"])
    p = _sub(
        sub,
        "rerecord",
        "run one step's tool live; the result becomes a candidate",
        "Imports the registry named in tapes.toml ([tapes] registry = 'module:attribute').",
    )
    p.add_argument("tape", help=tape_help)
    p.add_argument("--step", type=int, required=True, metavar="N", help="the step to run again")
    p.add_argument("--yes", action="store_true", help="confirm running a side-effecting tool")
    p.set_defaults(fn=commands["rerecord"])
    p = _sub(
        sub,
        "replay",
        "run tapes.toml's replay_command for a session (the app's p)",
        "{tape} in the command becomes the session's golden; it runs in the folder of tapes.toml.",
    )
    p.add_argument("tape", help=tape_help)
    p.set_defaults(fn=commands["replay"])
    p = _sub(
        sub,
        "recover",
        "finish or roll back what an interrupted command left",
        "Every command and the app do this first; sessions another process holds are left alone.",
    )
    p.set_defaults(fn=commands["recover"])
    p = _sub(
        sub,
        "scrub",
        "re-redact every tape, run log and cached index with the current rules",
        "Recomputes call keys and writes one changelog entry per session changed.",
    )
    p.add_argument("dir", nargs="?", help="tapes folder (default: tapes.toml's)")
    p.add_argument("--dry-run", action="store_true", help="change nothing; exit 1 if something would be removed")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(fn=commands["scrub"])
    _mcp(sub, commands["mcp"], tape_help, json_help)
    _traces(sub, commands, tape_help, json_help)
    return ap


def _traces(sub: Any, commands: Mapping[str, Command], tape_help: str, json_help: str) -> None:
    """``tapetui import otlp`` and ``tapetui export otlp``."""
    p = _sub(
        sub,
        "import",
        "turn OpenTelemetry traces into tapes that replay",
        "tapetui import otlp FILE... reads OTLP JSON (the file exporter's JSON Lines, or one document): GenAI\n"
        "spans (chat, execute_tool; the older event and indexed forms), OpenInference (LLM, TOOL) and MCP.\n"
        "One tape per trace (or per --group-by value); a new one is the golden (with a changelog entry),\n"
        "beside an existing golden it is a candidate for review.",
    )
    p.add_argument("format", choices=["otlp"], help="the trace format (OTLP JSON)")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="OTLP JSON files")
    p.add_argument("--out", type=Path, help="folder for the tapes (default: the tapes folder)")
    p.add_argument("--group-by", metavar="ATTR", help="one tape per value of this span or resource attribute")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(fn=commands["import"])
    p = _sub(
        sub,
        "export",
        "write tapes as OpenTelemetry spans (OTLP JSON Lines)",
        "Each tape is one trace: a model span per turn, an execute_tool span per call with tool.fingerprint,\n"
        "and each step's outcome in its latest run (tapetui.outcome), drift as span events.",
    )
    p.add_argument("format", choices=["otlp"], help="the trace format (OTLP JSON Lines)")
    p.add_argument(
        "tapes", nargs="+", metavar="TAPE", help=tape_help + "; or a run log (NAME.run.jsonl): that run's outcomes"
    )
    p.add_argument("--out", type=Path, help="file to write (default: standard output)")
    p.set_defaults(fn=commands["export"])


def _mcp(sub: Any, command: Command, tape_help: str, json_help: str) -> None:
    """``tapetui mcp serve`` and ``tapetui mcp verify`` (the MCP SDK is the optional extra ``tapetui[mcp]``)."""
    p = _sub(
        sub,
        "mcp",
        "serve a tape as an MCP server, or verify a live MCP server against a tape",
        "Needs the MCP Python SDK: pip install 'tapetui[mcp]'.",
    )
    msub = p.add_subparsers(dest="mcp_cmd", required=True, metavar="SUBCOMMAND")
    tape_help += " (or any path to a tape)"
    s = _sub(
        msub,
        "serve",
        "answer an MCP client over stdio from a tape: recorded contracts and calls; no tool ever runs",
        "A call that is not on the tape gets an isError result naming the nearest recorded call. Nothing\n"
        "but MCP is written on stdout; a summary goes to stderr when the client leaves.",
    )
    s.add_argument("tape", metavar="TAPE", help=tape_help)
    s.set_defaults(fn=command)
    v = _sub(
        msub,
        "verify",
        "start a live MCP server (COMMAND, stdio) and compare its tool contracts with the tape's",
        "Each contract (description, input and output schema, annotations, title) is compared field by\n"
        "field. --calls sends the tape's calls again and reports result differences by path; calls of\n"
        "tools not marked readOnlyHint (or marked destructiveHint) are skipped unless --yes.",
    )
    v.usage = "tapetui mcp verify [-h] [--calls [--yes]] [--json] [--timeout SECONDS] TAPE -- COMMAND [ARGS...]"
    v.add_argument("tape", metavar="TAPE", help=tape_help)
    v.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND", help="the server command, after --")
    v.add_argument("--calls", action="store_true", help="send the tape's calls again and compare the results")
    v.add_argument("--yes", action="store_true", help="with --calls: send calls of tools that may change things too")
    v.add_argument("--json", action="store_true", help=json_help)
    v.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long the server may take to start, and each call (default 30)",
    )
    v.set_defaults(fn=command, mcp_parser=v)
