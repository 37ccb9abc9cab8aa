"""``tapetui``: open the review app, or review tapes from scripts and CI.

Exit codes: 0 clean, 1 findings (drift, misses, unused steps, contract changes,
pending candidates), 2 usage errors or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson

from tapetui.config import Config, find_config, load_config
from tapetui.errors import TapeError
from tapetui.textsafe import safe_json_text, safe_text

__all__ = ["main"]

SUBCOMMANDS = ("check", "diff", "stats", "pending", "accept", "reject", "expire", "rerecord", "recover")


class _Out:
    """Human output: escaped text, colour only on a terminal without NO_COLOR."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.color = stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"

    def line(self, text: str = "", style: str | None = None) -> None:
        text = safe_text(text, newlines=False)
        if self.color and style:
            code = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "dim": "2", "cyan": "36"}[style]
            text = f"\x1b[{code}m{text}\x1b[0m"
        self.stream.write(text + "\n")


def _json(obj: Any) -> None:
    sys.stdout.write(safe_json_text(orjson.dumps(obj, option=orjson.OPT_INDENT_2, default=str).decode()) + "\n")


def _config(args: argparse.Namespace, tapes_dir: str | None = None) -> Config:
    if getattr(args, "config", None):
        cfg = load_config(args.config)
    else:
        found = find_config(Path.cwd())
        cfg = load_config(found) if found else None
        if tapes_dir is not None:
            d = Path(tapes_dir).resolve()
            if cfg is None or cfg.tapes_dir != d:
                from dataclasses import replace

                base = Config.for_dir(d)
                cfg = replace(cfg, tapes_dir=d, changelog=base.changelog, root=d) if cfg else base
        elif cfg is None:
            cfg = Config.for_dir(Path.cwd())
    if tapes_dir is not None and not Path(tapes_dir).is_dir():
        raise TapeError(f"{tapes_dir}: no such folder")
    return cfg


def _tape(cfg: Config, name: str) -> Path:
    p = Path(name)
    if not p.suffix:
        p = p.with_suffix(".jsonl")
    if not p.is_absolute() and not p.exists():
        p = cfg.tapes_dir / p
    from tapetui.store import golden_of, safe_path

    full = safe_path(cfg.tapes_dir, p.resolve())  # ../ escapes, absolute paths elsewhere, symlinks out: refused
    g = golden_of(full) or full
    if not g.exists() and not (g.with_name(g.name[:-6] + ".candidate.jsonl")).exists():
        raise TapeError(f"{name}: no such tape")
    return g


def _recover(cfg: Config, out: _Out) -> None:
    from tapetui.golden import recover

    for note in recover(cfg):
        out.line(f"tapetui: {note}", "yellow")


# ---- commands -----------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    from tapetui.golden import check_session, recover
    from tapetui.store import iter_goldens

    cfg = _config(args, args.dir)
    err = _Out(sys.stderr)
    for note in recover(cfg):
        err.line(f"tapetui: {note}", "yellow")
    goldens = list(iter_goldens(cfg.tapes_dir))
    reports = []
    progress = None
    if sys.stderr.isatty() and len(goldens) > 50 and not args.json:
        from rich.console import Console
        from rich.progress import Progress

        progress = Progress(console=Console(stderr=True), transient=True)
    if progress is not None:
        with progress:
            task = progress.add_task("checking tapes", total=len(goldens))
            for g in goldens:
                reports.append(check_session(g, cfg))
                progress.advance(task)
    else:
        reports = [check_session(g, cfg) for g in goldens]
    unreadable = [r for r in reports if r.error]
    failing = [r for r in reports if not r.ok]
    if args.json:
        _json({"ok": not failing, "sessions": len(reports), "failing": len(failing),
               "reports": [r.to_json() for r in reports if not r.ok or r.findings]})
    else:
        out = _Out(sys.stdout)
        for r in reports:
            if r.ok and not r.findings:
                continue
            out.line(f"{r.session}", "bold")
            if r.error:
                out.line(f"  error: {r.error}", "red")
            for f in r.findings:
                out.line(f"  {f.text}", "yellow" if f.warning else ("cyan" if f.kind == "candidate" else "red"))
        summary = f"{len(reports)} session(s) checked, {len(failing)} with findings"
        out.line(summary, "red" if failing else "green")
    if unreadable:
        for r in unreadable:
            err.line(f"tapetui: {r.error}", "red")
        return 2
    return 1 if failing else 0


def cmd_diff(args: argparse.Namespace) -> int:
    from tapetui.golden import compare, compare_run
    from tapetui.store import candidate_path, runlog_path
    from tapetui.runlog import read_run_log
    from tapetui.tapefile import read_index

    cfg = _config(args)
    a = _tape(cfg, args.a)
    other = Path(args.b).resolve() if args.b else candidate_path(a)
    if not args.b and not other.exists():
        other = runlog_path(a)
    if not other.exists():
        raise TapeError(f"{a}: nothing to compare with (no candidate and no run log; name one as B)")
    out = _Out(sys.stdout)
    if other.name.endswith(".run.jsonl"):
        findings = compare_run(read_index(a, validate=True), read_run_log(other), cfg)
        if args.json:
            _json({"golden": str(a), "run_log": str(other), "findings": [f.to_json() for f in findings]})
        else:
            out.line(f"{a.name} ⟷ {other.name} (run log)", "bold")
            for f in findings:
                out.line(f"  {f.text}", "yellow" if f.warning else "red")
            if not findings:
                out.line("  no differences", "green")
        return 1 if any(not f.warning for f in findings) else 0
    cmp = compare(a, other, cfg)
    if args.json:
        _json(cmp.to_json())
    else:
        out.line(f"{a.name} ⟷ {other.name}", "bold")
        for line in cmp.lines() or ["no differences"]:
            out.line(f"  {line}", "green" if cmp.clean else "red")
    return 0 if cmp.clean else 1


def cmd_stats(args: argparse.Namespace) -> int:
    from tapetui.golden import stats_of
    from tapetui.store import iter_goldens, session_name

    cfg = _config(args)
    target = Path(args.target) if args.target else cfg.tapes_dir
    goldens = list(iter_goldens(target)) if target.is_dir() else [_tape(cfg, str(target))]
    rows = {session_name(g, cfg.tapes_dir): stats_of(g) for g in goldens if g.exists()}
    if args.json:
        _json(rows)
        return 0
    out = _Out(sys.stdout)
    for name, s in rows.items():
        last = s.get("last_run") or {}
        run = (f"last run: {last.get('tape_hits', 0)} hits, {last.get('tape_misses', 0)} misses, "
               f"{last.get('drift_events', 0)} drift, {last.get('unused', 0)} unused") if last else "no run yet"
        out.line(f"{name}: {s['steps']} steps, {len(s['tools'])} tools, {s['side_effect_steps']} with side effects, "
                 f"{s['expired']}/{s['time_sensitive']} expired; {run}"
                 + ("; candidate pending" if s["pending_candidate"] else ""))
    return 0


def cmd_pending(args: argparse.Namespace) -> int:
    from tapetui.golden import compare, pending
    from tapetui.store import session_name

    cfg = _config(args)
    _recover(cfg, _Out(sys.stderr))
    items = []
    for g, c in pending(cfg):
        item: dict[str, Any] = {"session": session_name(g, cfg.tapes_dir), "golden": str(g), "candidate": str(c)}
        if g.exists():
            cmp = compare(g, c, cfg)
            item["changed_steps"] = [s.seq for s in cmp.changed_steps]
            item["edit_distance"] = cmp.edit_distance
            item["contracts"] = sorted(cmp.contracts)
        items.append(item)
    if args.json:
        _json(items)
    else:
        out = _Out(sys.stdout)
        for it in items:
            out.line(f"{it['session']}: steps {it.get('changed_steps', 'all (new session)')} differ"
                     + (f", contract of {', '.join(it['contracts'])} changed" if it.get("contracts") else ""))
        if not items:
            out.line("no pending candidates")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    from tapetui.golden import accept

    cfg = _config(args)
    entry = accept(cfg, _tape(cfg, args.tape), args.why, args.step or None)
    _Out(sys.stdout).line(f"accepted {entry.session}" + (f" steps {list(entry.steps)}" if args.step else "")
                          + f"; changelog entry {entry.id} in {cfg.changelog}", "green")
    return 0


def cmd_reject(args: argparse.Namespace) -> int:
    from tapetui.golden import reject

    cfg = _config(args)
    tape = _tape(cfg, args.tape)
    reject(cfg, tape, args.why)
    _Out(sys.stdout).line(f"rejected the candidate of {tape.name}", "green")
    return 0


def cmd_expire(args: argparse.Namespace) -> int:
    from tapetui.golden import expire

    cfg = _config(args)
    if not args.step and not args.all_time_sensitive:
        raise _Usage("expire needs --step N or --all-time-sensitive")
    entry = expire(cfg, _tape(cfg, args.tape), args.step, all_time_sensitive=args.all_time_sensitive, why=args.why)
    _Out(sys.stdout).line(f"expired {entry.session} steps {list(entry.steps)}; the next fill re-records them",
                          "green")
    return 0


def cmd_rerecord(args: argparse.Namespace) -> int:
    from tapetui.golden import rerecord

    cfg = _config(args)
    tape = _tape(cfg, args.tape)
    _Out(sys.stderr).line(f"tapetui: importing the registry {cfg.registry} to run the live tool")
    cand = rerecord(cfg, tape, args.step, yes=args.yes)
    _Out(sys.stdout).line(f"re-recorded step {args.step}; review it: tapetui diff {tape.name} {cand.name}", "green")
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    from tapetui.golden import recover

    cfg = _config(args)
    notes = recover(cfg)
    out = _Out(sys.stdout)
    for n in notes:
        out.line(n)
    if not notes:
        out.line("nothing to recover")
    return 0


class _Usage(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tapetui", description="Record, replay and review agent tool calls.")
    ap.add_argument("--config", help="tapes.toml to use (default: the nearest one above the current folder)")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    p = sub.add_parser("check", help="exit 1 on drift, misses, unused steps, contract changes or pending candidates")
    p.add_argument("dir", nargs="?", help="tapes folder (default: tapes.toml's)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("diff", help="compare a golden with its candidate, run log, or another tape")
    p.add_argument("a", help="the golden tape")
    p.add_argument("b", nargs="?", help="candidate, run log or tape (default: A's candidate, else its run log)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_diff)
    p = sub.add_parser("stats", help="counts per session")
    p.add_argument("target", nargs="?", help="a tape or a folder")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_stats)
    p = sub.add_parser("pending", help="list candidates waiting for review")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_pending)
    p = sub.add_parser("accept", help="promote a candidate to golden, with a rationale in the changelog")
    p.add_argument("tape")
    p.add_argument("--why", help="the rationale (required)")
    p.add_argument("--step", type=int, action="append", help="accept only this golden step (repeatable)")
    p.set_defaults(fn=cmd_accept)
    p = sub.add_parser("reject", help="discard a candidate")
    p.add_argument("tape")
    p.add_argument("--why", help="note the reason in the changelog")
    p.set_defaults(fn=cmd_reject)
    p = sub.add_parser("expire", help="mark entries expired so the next fill re-records them")
    p.add_argument("tape")
    p.add_argument("--step", type=int, action="append")
    p.add_argument("--all-time-sensitive", action="store_true")
    p.add_argument("--why")
    p.set_defaults(fn=cmd_expire)
    p = sub.add_parser("rerecord", help="run one step's tool live; the result becomes a candidate")
    p.add_argument("tape")
    p.add_argument("--step", type=int, required=True)
    p.add_argument("--yes", action="store_true", help="confirm running a side-effecting tool")
    p.set_defaults(fn=cmd_rerecord)
    p = sub.add_parser("recover", help="finish or roll back interrupted accepts")
    p.set_defaults(fn=cmd_recover)
    return ap


def _ui(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="tapetui", description="Open the review app on a tapes folder. "
                                 f"Subcommands: {', '.join(SUBCOMMANDS)} (tapetui COMMAND --help).")
    ap.add_argument("dir", nargs="?", help="tapes folder (default: the tapes dir of ./tapes.toml)")
    ap.add_argument("--config", help="tapes.toml to use")
    args = ap.parse_args(argv)
    cfg = _config(args, args.dir)
    if not cfg.tapes_dir.is_dir():
        raise TapeError(f"{cfg.tapes_dir}: no such folder")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise _Usage("no terminal: the app needs an interactive terminal (try `tapetui check` in scripts)")
    try:
        from tapetui.tui.app import TapeApp
    except ImportError as e:  # pragma: no cover - textual is a base dependency
        raise TapeError(f"the terminal UI cannot start: {e}") from None
    TapeApp(cfg).run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    err = _Out(sys.stderr)
    try:
        first = next((a for a in argv if not a.startswith("-")), None)
        if first in SUBCOMMANDS or any(a in ("-h", "--help") for a in argv[:1]) and first in SUBCOMMANDS:
            args = _parser().parse_args(argv)
            return int(args.fn(args))
        return _ui(argv)
    except _Usage as e:
        err.line(f"tapetui: {e}", "red")
        return 2
    except TapeError as e:
        err.line(f"tapetui: {e}", "red")
        return 2
    except RecursionError:  # every reader turns this into a TapeError naming the file; a last guard
        err.line("tapetui: the input is nested too deeply to process", "red")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
