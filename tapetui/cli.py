"""``tapetui``: open the review app, or review tapes from scripts and CI.

Exit codes: 0 clean, 1 findings (drift, misses, unused steps, contract changes,
pending candidates, a run that ended in an error or has no end, a stored key that
does not match its arguments), 2 usage errors, unreadable or malformed input (a
tape or run log that is not what tapetui wrote, a FIFO or folder in a tape's place),
and a tapes folder that does not exist or holds no tapes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import stat
import sys
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, NoReturn

import tapetui.ci_formats as ci_formats
import tapetui.cli_parser as cli_parser
import tapetui.review as review
import tapetui.review.shards as shards
from tapetui.cli_output import Out, ProgressBar, plural, print_json
from tapetui.core.changes import show_redacted_by
from tapetui.core.comparators import hooks_running
from tapetui.core.config import Config, config_for_tape, find_config, load_config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write, file_kind
from tapetui.core.redact import DEFAULT_REDACTOR
from tapetui.core.runlog import end_counts
from tapetui.core.store import (
    candidate_path,
    golden_of,
    inside,
    iter_goldens,
    resolved,
    safe_path,
    samples_dir,
    samples_of,
    session_name,
)
from tapetui.core.textsafe import inert_json_commands
from tapetui.review.lookup import session_tape, tape_file
from tapetui.review.scrub import scrub
from tapetui.review.sessions import FilterError, select

__all__ = ["main"]

SUBCOMMANDS = (
    "check",
    "diff",
    "stats",
    "pending",
    "accept",
    "reject",
    "expire",
    "undo",
    "rerecord",
    "replay",
    "recover",
    "scrub",
    "mcp",
    "import",
    "export",
)


def _config(args: argparse.Namespace, tapes_dir: str | None = None, *, must_exist: bool = True) -> Config:
    if getattr(args, "config", None):
        cfg = load_config(args.config)
    else:
        found = find_config(Path.cwd())
        near = load_config(found) if found else None
        if tapes_dir is not None:
            d = resolved(Path(tapes_dir))
            base = Config.for_dir(d)
            if near is None:
                cfg = base
            else:
                cfg = near if near.tapes_dir == d else replace(near, tapes_dir=d, changelog=base.changelog, root=d)
        elif near is None:  # the pytest plugin's default too, so every command names a session the same way
            cfg = Config.for_dir(Path.cwd() / "tapes" if (Path.cwd() / "tapes").is_dir() else Path.cwd())
        else:
            cfg = near
    show_redacted_by(cfg.redactor())  # what this command shows of a tape: redacted by the project's rules too
    if must_exist and tapes_dir is not None and not Path(tapes_dir).is_dir():
        raise TapeError(
            f"no tapes found in {tapes_dir}: no such folder (tapes.toml: {cfg.path or 'none found'}); "
            "name the folder your tapes are in, or record one first"
        )
    return cfg


def _recover(cfg: Config, out: Out) -> None:
    for note in review.recover(cfg):
        out.line(f"tapetui: {note}", "yellow")


# ---- commands -----------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    cfg = _config(args, args.dir, must_exist=False)
    err = Out(sys.stderr)
    # every usage error first: samples are recorded (an agent run, tokens spent) only for a command that then runs
    if args.json and args.format not in (None, "json"):
        raise _Usage(f"--json is --format json: give one of them, not --json with --format {args.format}")
    fmt = "json" if args.json else args.format or "text"
    if args.merge:
        return _merge_reports(args, fmt, cfg)
    tapes = Path(args.dir) if args.dir else cfg.tapes_dir
    shard = shards.parse_shard(args.shard) if args.shard is not None else None
    if shard is not None and (args.samples is not None or args.sample):
        raise _Usage("--shard checks a part of the folder: count samples without it")
    jobs = _jobs(args.jobs)
    if args.samples not in (None, "folder"):  # recorded first: check then reads the folder as they left it
        args.recorded = _record_samples(args, cfg, err)
    listed: list[Path] = []  # every session of the folder, as check listed them (after recover)
    bar = ProgressBar(sys.stderr.isatty() and fmt == "text")  # stderr only, and never beside a machine format
    try:
        # a folder that does not exist or holds no tapes raises: a misconfigured CI job must not go green
        reports = review.check(
            tapes,
            cfg,
            progress=bar,
            on_note=lambda n: err.line(f"tapetui: {n}", "yellow"),
            jobs=jobs,
            cache=args.samples is None and not args.sample,  # samples are recorded now: nothing to keep
            require_run=args.require_run,
            select=None if shard is None else (lambda name: shards.in_shard(name, *shard)),
            on_listed=listed.extend,
        )
    finally:
        bar.close()
    if args.samples is not None or args.sample:
        _check_samples(args, cfg, reports, err)
    unreadable = [r for r in reports if r.error]
    failing = [r for r in reports if not r.ok]
    if fmt in ("junit", "github", "markdown"):
        render = {"junit": ci_formats.junit, "github": ci_formats.github, "markdown": ci_formats.markdown}[fmt]
        sys.stdout.write(render(reports))
        sys.stdout.flush()
    elif fmt == "json":
        doc: dict[str, Any] = {
            "ok": not failing,
            "sessions": len(reports),
            "failing": len(failing),
            "reports": [r.to_json() for r in reports if not r.ok or r.findings],
        }
        if shard is not None:  # what --merge checks: one folder, one version and config, every shard, these files
            names = [session_name(g, cfg.tapes_dir) for g in listed]
            doc |= shards.identity(tapes, cfg, names, cli_parser.version(), shard, require_run=args.require_run)
            doc["files_digest"] = shards.files_digest({r.session: r.golden for r in reports})
        print_json(doc)
    else:
        _print_reports(reports, f"{len(reports)} session(s) checked, {len(failing)} with findings", bool(failing))
    if unreadable:
        for r in unreadable:
            err.line(f"tapetui: {r.error}", "red")
        return 2
    return 1 if failing else 0


def _jobs(text: str) -> int | Literal["auto"]:
    """``--jobs``: a number of processes from 1, or ``auto`` (decided by :func:`tapetui.review.check`, which
    counts the sessions as it lists them)."""
    if text == "auto":
        return "auto"
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 1024:
        raise _Usage(f"--jobs takes a number of processes from 1 to 1024, or auto; got {text[:40]!r}")
    return int(text)


def _print_reports(reports: list[review.SessionReport], summary: str, failed: bool) -> None:
    """``check``'s text output: each session with findings (its error, findings, run dimensions), then ``summary``."""
    out = Out(sys.stdout)
    for r in reports:
        if r.ok and not r.findings:
            continue
        out.line(f"{r.session}", "bold")
        if r.error:
            out.line(f"  error: {r.error}", "red")
        for f in r.findings:
            # a warning says so in words too: CI logs and NO_COLOR show no yellow
            marked = f.warning and f.kind not in _TAGGED_KINDS
            out.line(f"  {'warning: ' if marked else ''}{f.text}", _finding_style(f))
        dims = r.dimension_line()
        if dims and any(f.kind in _RUN_KINDS for f in r.findings):
            out.line(f"  {dims}", "cyan")
    out.line(summary, "red" if failed else "green")


def _merge_reports(args: argparse.Namespace, fmt: str, cfg: Config) -> int:
    """``check --merge REPORT…``: every shard's report as one verdict, in any ``--format``, checked against the
    folder in this checkout (the one the shards checked: its name, its sessions, this tapetui's version)."""
    if args.shard is not None or args.samples is not None or args.sample or args.jobs != "auto" or args.require_run:
        raise _Usage(
            "--merge reads the shards' reports only: give it without --shard, --jobs, --require-run or samples "
            "(give the shards --require-run)"
        )
    tapes = Path(args.dir) if args.dir else cfg.tapes_dir
    # the sessions as the shards' check listed them: the same listing, so the same names and digest
    listed = review.folder_sessions(tapes, cfg) if tapes.is_dir() else []
    goldens = {session_name(g, cfg.tapes_dir): g for g in listed}
    if not goldens:
        raise TapeError(
            f"{review.no_tapes_message(tapes, cfg)}: --merge runs in a checkout of the folder the shards checked"
        )
    expected = shards.identity(tapes, cfg, goldens, cli_parser.version(), (1, 1))
    merged = shards.merge(args.merge, expected, goldens)
    reports = merged.session_reports()
    if fmt == "json":
        print_json(merged.to_json())
    elif fmt in ("junit", "github", "markdown"):  # the sessions with findings, each; the others counted
        if fmt == "junit":
            sys.stdout.write(ci_formats.junit(reports, total=merged.sessions))
        elif fmt == "markdown":
            sys.stdout.write(ci_formats.markdown(reports, total=merged.sessions))
        else:
            sys.stdout.write(ci_formats.github(reports))
        sys.stdout.flush()
    else:
        summary = f"{merged.sessions} session(s) checked in {merged.shards} shard(s), {merged.failing} with findings"
        _print_reports(reports, summary, not merged.ok)
    if merged.errors:
        err = Out(sys.stderr)
        for r in reports:
            if r.error:
                err.line(f"tapetui: {r.error}", "red")
        return 2
    return 0 if merged.ok else 1


_RUN_KINDS = frozenset({"drift", "miss", "tools", "unused", "note", "tolerated", "capability", "fingerprint"})
_TAGGED_KINDS = frozenset({"candidate", "tools", "samples", "capability"})
"""Findings whose lines open with a tag of their own (``[VERDICT]``, ``[TOOLS]``, ``[SAMPLES]``, ``[NEW TOOL]``):
a warning among them is not marked ``warning:``."""


def _finding_style(f: review.Finding) -> str:
    """A finding's colour, from its fields: a verdict line by its level (as the app shows it), then a warning."""
    if f.level == "pass":
        return "green"
    if f.level in ("fail", "capability"):
        return "red"
    if f.warning:
        return "yellow"
    return "cyan" if f.kind == "candidate" else "red"


MAX_SAMPLES = 1000


def _record_samples(args: argparse.Namespace, cfg: Config, err: Out) -> dict[Path, list[Path]]:
    """``check --samples N``: run record_command N times for each session, before anything is checked (the samples
    land in ``NAME.samples/``; a pending candidate and the run log are put back as they were)."""
    text = str(args.samples)
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_SAMPLES:
        raise _Usage(f"--samples takes a number of runs from 1 to {MAX_SAMPLES}, got {text!r}")
    if args.sample:
        raise _Usage("--sample names the samples itself: give it without --samples")
    n = int(text)
    tapes = Path(args.dir) if args.dir else cfg.tapes_dir
    goldens = list(iter_goldens(tapes)) if tapes.is_dir() else []
    if not goldens:
        raise TapeError(review.no_tapes_message(tapes, cfg))
    out: dict[Path, list[Path]] = {}
    for g in goldens:
        name = session_name(g, cfg.tapes_dir)

        def said(i: int, _argv: list[str], name: str = name) -> None:
            err.line(f"tapetui: {name}: recording sample {i} of {n}")

        notes: list[str] = []
        try:
            out[g] = review.record_samples(cfg, g, n, on_run=said, notes=notes)
        finally:
            for note in notes:
                err.line(f"tapetui: {note}", "yellow")
    return out


def _check_samples(args: argparse.Namespace, cfg: Config, reports: list[review.SessionReport], err: Out) -> None:
    """``check --samples [N]`` / ``--sample FILE``: each session's samples judged, added to its report."""
    source: review.SampleSource
    if args.sample:
        if args.samples is not None:
            raise _Usage("--sample names the samples itself: give it without --samples")
        by_golden: dict[Path, list[Path]] = {}
        for f in args.sample:
            full = safe_path(cfg.tapes_dir, resolved(f))
            g = golden_of(full)
            if g is None or not full.exists():
                raise TapeError(f"{f}: not a candidate, sample or run log of a session in {cfg.tapes_dir}")
            if g == full:
                raise TapeError(f"{f}: is the golden itself, not a sample of it")
            by_golden.setdefault(g, []).append(full)
        source = by_golden
    elif args.samples == "folder":
        source = "folder"
    else:
        source = args.recorded
    counted = review.add_samples(cfg, reports, source)
    if counted == 0:
        raise TapeError(
            "no samples to count: no session has older candidates (NAME.samples/) or a pending candidate; "
            "record some, or use --samples N with a record_command in tapes.toml"
        )


def cmd_diff(args: argparse.Namespace) -> int:
    cfg = _config(args)
    golden = session_tape(cfg, args.a)
    other = Path(args.b) if args.b else None
    if other is not None and not other.is_absolute() and not other.exists():
        other = golden.parent / other  # a name beside the golden, as `rerecord` and `pending` print them
        if not other.exists() and not other.suffix:
            try:
                other = session_tape(cfg, args.b)  # another session: `tapetui diff monday tuesday`
            except TapeError:
                if os.path.lexists(cfg.tapes_dir / f"{args.b}.jsonl"):  # there, and refused (a link out): say why
                    raise
    d = review.diff(cfg, golden, resolved(other) if other is not None else None)
    if args.json:
        print_json(d.to_json())
    else:
        out = Out(sys.stdout)
        out.line(d.title, "bold")
        style = {"differs": "red", "warning": "yellow", "clean": "green"}
        for text, level in d.rows():
            out.line(f"  {text}", style[level])
    return 1 if d.differs else 0


def cmd_stats(args: argparse.Namespace) -> int:
    cfg = _config(args)
    target = Path(args.target) if args.target else cfg.tapes_dir
    rows = review.stats(cfg, target if target.is_dir() else session_tape(cfg, str(target)))
    failed = 2 if any("error" in s for s in rows.values()) else 0  # a session that cannot be read: said, exit 2
    if args.json:
        print_json(rows)
        return failed
    out = Out(sys.stdout)
    for name, s in rows.items():
        if "error" in s:  # bad input, said as every command says it (the other sessions' lines still printed)
            Out(sys.stderr).line(f"tapetui: {name}: {s['error']}", "red")
            continue
        last = s.get("last_run") or {}
        if not last:
            run = "no run yet"
        elif last.get("mode") == "record":
            run = f"last run: a recording of {plural(last.get('steps', 0), 'call')}"
        else:
            run = f"last run: {end_counts(last)}"
            if last.get("model_hits") or last.get("live_model_calls"):
                live, saved = last.get("tokens_live", 0), last.get("tokens_saved", 0)
                run += f"; tokens {live:,} spent live, {saved:,} served from the tape"
        turns = (
            f", {plural(s['model_turns'], 'model turn')} ({', '.join(s['models'])}; {s['recorded_tokens']:,} tokens)"
            if s.get("model_turns")
            else ""
        )
        timed = (
            f"{s['expired']} of {plural(s['time_sensitive'], 'time-sensitive entry')} expired"
            if s["time_sensitive"]
            else "no time-sensitive entries"
        )
        out.line(
            f"{name}: {plural(s['steps'], 'step')}, {plural(len(s['tools']), 'tool')}{turns}, "
            f"{s['side_effect_steps']} with side effects, {timed}; {run}"
            + ("; candidate pending" if s["pending_candidate"] else "")
        )
    return failed


def cmd_pending(args: argparse.Namespace) -> int:
    cfg = _config(args)
    _recover(cfg, Out(sys.stderr))
    items = []
    for g, c in review.pending(cfg):
        item: dict[str, Any] = {
            "session": session_name(g, cfg.tapes_dir),
            "golden": str(g),
            "candidate": str(c),
            "older_candidates": [str(p) for p in samples_of(g)],
        }
        if g.exists():
            cmp = review.compare(g, c, cfg, hooks=None)  # only check and diff run comparison hooks
            item["changed_steps"] = [s.seq for s in cmp.changed_steps]
            item["edit_distance"] = cmp.edit_distance
            item["contracts"] = sorted(cmp.contracts)
        items.append(item)
    if args.json:
        print_json(items)
    else:
        out = Out(sys.stdout)
        for it in items:
            older = len(it["older_candidates"])
            changed = it.get("changed_steps")
            what = (
                "every step (a new session)"
                if changed is None
                else "no step"
                if not changed
                else f"{plural(len(changed), 'step', name_only=True)} {', '.join(map(str, changed))}"
            )
            out.line(
                f"{it['session']}: {what} differ{'s' if changed is not None and len(changed) <= 1 else ''}"
                + (f", contract of {', '.join(it['contracts'])} changed" if it.get("contracts") else "")
                + (
                    f"; {older} older candidate(s) it displaced are kept in {samples_dir(Path(it['golden']))}"
                    if older
                    else ""
                )
            )
        if not items:
            out.line("no pending candidates")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    cfg = _config(args)
    if args.all:
        return _accept_all(args, cfg)
    if args.filter is not None:
        raise _Usage("--filter goes with --all")
    if args.tape is None:
        raise _Usage("accept needs a TAPE, or --all")
    if args.rule:
        return _accept_rules(args, cfg)
    entry = review.accept(cfg, session_tape(cfg, args.tape), args.why, args.step or None)
    Out(sys.stdout).line(
        f"accepted {entry.session}"
        + (
            f" {plural(len(entry.steps), 'step', name_only=True)} {', '.join(map(str, entry.steps))}"
            if args.step
            else ""
        )
        + f"; changelog entry {entry.id} in {cfg.changelog}",
        "green",
    )
    return 0


def _accept_rules(args: argparse.Namespace, cfg: Config) -> int:
    """``accept TAPE --rule KIND:PATH[=VALUE] --why …``: the candidate accepted (when there is one), then each
    rule added to the session's table in tapes.toml, each change with its changelog entry."""
    if args.why is None or not args.why.strip():  # before anything changes: nothing is accepted without one
        raise TapeError("accept needs a rationale (--why TEXT): the changelog records why a golden changed")
    golden = session_tape(cfg, args.tape)
    specs = [review.check_rule(cfg, golden, r) for r in args.rule]  # every rule checked before anything changes
    out = Out(sys.stdout)
    if candidate_path(golden).exists():
        entry = review.accept(cfg, golden, args.why, args.step or None)
        out.line(f"accepted {entry.session}; changelog entry {entry.id} in {cfg.changelog}", "green")
    elif args.step:
        raise TapeError(f"{golden}: no pending candidate to accept steps of")
    for spec in specs:
        rule_entry, cfg, done = review.add_rule(cfg, golden, spec, args.why)
        out.line(f"{done}; changelog entry {rule_entry.id}" if rule_entry else done, "green")
    return 0


def _accept_all(args: argparse.Namespace, cfg: Config) -> int:
    """``accept --all [--filter F]``: the app's accept of marked or filtered sessions (A), for scripts."""
    if args.tape is not None or args.step:
        raise _Usage("--all accepts whole candidates of every session: give no TAPE and no --step")
    if args.why is None or not args.why.strip():  # before anything is read: nothing is accepted without one
        raise TapeError("accept needs a rationale (--why TEXT): the changelog records why a golden changed")
    _recover(cfg, Out(sys.stderr))
    try:
        chosen = [s.golden for s in select(cfg, args.filter, pending_only=True)]
    except FilterError as e:
        raise _Usage(str(e)) from None
    out, err = Out(sys.stdout), Out(sys.stderr)
    if not chosen:
        out.line("no pending candidates" + (f" match {args.filter!r}" if args.filter else ""))
        return 0
    # every rule checked for every session before anything changes: one that cannot be written is exit 2, with
    # nothing accepted
    specs = {g: [review.check_rule(cfg, g, r) for r in args.rule or ()] for g in chosen}
    results = review.accept_all(cfg, args.why, chosen)
    for r in results:
        name = session_name(r.golden, cfg.tapes_dir)
        if r.entry is not None:
            out.line(f"accepted {name}; changelog entry {r.entry.id}", "green")
            for spec in specs[r.golden]:  # into the session's own table, each with its changelog entry
                rule_entry, cfg, done = review.add_rule(cfg, r.golden, spec, args.why)
                out.line(f"{done}; changelog entry {rule_entry.id}" if rule_entry else done, "green")
        else:
            err.line(f"tapetui: {name}: {r.error}", "red")
    ok = sum(r.ok for r in results)
    out.line(f"{ok} of {len(results)} candidate(s) accepted; changelog: {cfg.changelog}", "green" if ok else "red")
    return 0 if ok == len(results) else 2


def cmd_undo(args: argparse.Namespace) -> int:
    cfg = _config(args)
    tape = session_tape(cfg, args.tape)
    entry = review.undo(cfg, tape)
    reverted = entry.details[0] if entry.details else "reverted the last change"
    Out(sys.stdout).line(f"undid a change of {entry.session}: {reverted}; changelog entry {entry.id}", "green")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Run tapes.toml's replay_command for one session (the app's p); exit with the command's code."""
    cfg = _config(args)
    command = review.replay_command(cfg, session_tape(cfg, args.tape))
    Out(sys.stderr).line(f"tapetui: running {command.shown()} in {cfg.root}")
    return command.run(capture=False).returncode


def cmd_reject(args: argparse.Namespace) -> int:
    cfg = _config(args)
    tape = session_tape(cfg, args.tape)
    entry = review.reject(cfg, tape, args.why)
    Out(sys.stdout).line(f"rejected the candidate of {entry.session}; changelog entry {entry.id}", "green")
    return 0


def cmd_expire(args: argparse.Namespace) -> int:
    cfg = _config(args)
    if not args.step and not args.all_time_sensitive:
        raise _Usage("expire needs --step N or --all-time-sensitive")
    try:
        entry = review.expire(
            cfg, session_tape(cfg, args.tape), args.step, all_time_sensitive=args.all_time_sensitive, why=args.why
        )
    except review.AlreadyExpired as e:  # nothing changed and nothing is wrong
        Out(sys.stdout).line(str(e))
        return 0
    steps = ", ".join(map(str, entry.steps))
    Out(sys.stdout).line(
        f"expired {entry.session} step{'s' if len(entry.steps) != 1 else ''} {steps}; "
        f"the next fill re-records {'them' if len(entry.steps) != 1 else 'it'}",
        "green",
    )
    return 0


def cmd_rerecord(args: argparse.Namespace) -> int:
    cfg = _config(args)
    tape = session_tape(cfg, args.tape)
    if cfg.registry:  # without one, rerecord says what to configure
        Out(sys.stderr).line(f"tapetui: importing the registry {cfg.registry} to run the live tool")
    cand = review.rerecord(cfg, tape, args.step, yes=args.yes)
    name = shlex.quote(session_name(tape, cfg.tapes_dir))
    said = review.rerecorded_message(tape, cand, args.step)
    Out(sys.stdout).line(
        f"re-recorded step {args.step} into {cand.name}: {said}; review it: tapetui diff {name}, then accept or "
        "reject it",
        "green",
    )
    return 0


def cmd_scrub(args: argparse.Namespace) -> int:
    """Re-redact every session with the current rules. Exit 0 when done (whether or not anything held a
    secret), 1 with ``--dry-run`` when something would be removed, 2 when a session could not be scrubbed."""
    cfg = _config(args, args.dir)
    report = scrub(cfg, Path(args.dir) if args.dir else None, dry_run=args.dry_run)
    if args.json:
        print_json(report.to_json())
    else:
        out = Out(sys.stdout)
        verb = "would remove" if args.dry_run else "removed"
        for f in report.files:
            out.line(f"{f.session}: {f.summary()}", "yellow")
        if report.cache_dropped:
            out.line(
                f"index cache: {report.cache_dropped} entr{'y' if report.cache_dropped == 1 else 'ies'} "
                f"{'to drop' if args.dry_run else 'dropped'} (the next open of a big tape makes a new one)"
            )
        if report.history_dropped:
            out.line(
                f"undo history: {plural(report.history_dropped, 'record')} that kept what the rules remove "
                f"{'to drop' if args.dry_run else 'dropped'} (those changes can no longer be undone)"
            )
        rules = report.rules
        total = ", ".join(f"{name} ×{n}" for name, n in sorted(rules.items()))
        done = "to scrub" if args.dry_run else "scrubbed"
        summary = f"{report.sessions} session(s) checked, {len(report.changed_sessions)} {done}" + (
            f"; {verb}: {total}" if total else "; nothing to remove"
        )
        if report.entries:
            n = len(report.entries)
            summary += f"; {n} changelog entr{'y' if n == 1 else 'ies'} in {cfg.changelog}"
        out.line(summary, "green" if not report.errors else "red")
    if report.errors:
        err = Out(sys.stderr)
        for e in report.errors:
            err.line(f"tapetui: {e}", "red")
        return 2
    return 1 if args.dry_run and report.changed else 0


def cmd_recover(args: argparse.Namespace) -> int:
    cfg = _config(args)
    notes = review.recover(cfg)
    out, err = Out(sys.stdout), Out(sys.stderr)
    left = [n for n in notes if isinstance(n, review.LeftInPlace)]
    for n in notes:
        if isinstance(n, review.LeftInPlace):
            err.line(f"tapetui: {n}", "red")
        else:
            out.line(n)
    if not notes:
        out.line("nothing to recover")
    return 2 if left else 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``tapetui mcp serve TAPE`` and ``tapetui mcp verify TAPE -- COMMAND`` (see tapetui.integrations.mcp_cli)."""
    try:
        # deferred: the MCP SDK is an optional extra (tapetui[mcp]), loaded only when `tapetui mcp` runs
        from tapetui.integrations import mcp_cli
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("mcp"):
            raise
        raise TapeError(f"tapetui mcp needs the MCP Python SDK ({e}): pip install 'tapetui[mcp]'") from None
    cfg = _config(args)
    tape = tape_file(cfg.tapes_dir, args.tape)  # the CLI's lookup: a session name stays in the tapes folder
    if args.mcp_cmd == "serve":
        return mcp_cli.serve(tape, Out(sys.stderr).line)  # stdout is the MCP channel
    report = mcp_cli.verify(
        tape,
        mcp_cli.server_command(args),
        calls=args.calls,
        yes=args.yes,
        timeout=args.timeout,
        config=cfg if args.config else None,  # else the tape's own tapes.toml, as a replay of it uses
    )
    if args.json:
        print_json(report.to_json())
        if report.error is not None:
            Out(sys.stderr).line(f"tapetui: {report.error}", "red")
    else:
        out = Out(sys.stdout)
        for text, style in report.lines():
            out.line(text, style)
    return report.exit_code


def cmd_import(args: argparse.Namespace) -> int:
    """``tapetui import otlp FILE...`` (see tapetui.traces.importer)."""
    cfg = _config(args)
    out_dir = resolved(args.out) if args.out is not None else cfg.tapes_dir
    if out_dir.exists() and not out_dir.is_dir():
        raise TapeError(f"{args.out}: --out must be a folder (the tapes go there), and this is a file")
    if args.group_by is not None and not args.group_by.strip():
        raise TapeError("--group-by needs an attribute's name (e.g. session.id)")
    # deferred: the trace modules import the recording engine (asyncio with it), which no other command needs
    from tapetui.traces.importer import import_otlp

    if inside(cfg.tapes_dir, out_dir) is None:
        # another folder's tapes are that folder's sessions, with its changelog (its own tapes.toml's when one
        # covers it): a golden is never made without an entry where its folder keeps them; this project's rules
        # (redaction first) still apply to what is written
        there = config_for_tape(out_dir / "_.jsonl")
        cfg = replace(cfg, tapes_dir=there.tapes_dir, changelog=there.changelog)
    report = import_otlp(args.files, out_dir, group_by=args.group_by, config=cfg)
    if args.json:
        print_json(report.to_json())
    else:
        out = Out(sys.stdout)
        for line in report.lines():
            out.line(line, "yellow" if line.startswith("notice:") else "")
    return 0


def _export_target(given: Path, cfg: Config) -> Path:
    """Where ``export --out`` writes: a new file or a regular one (replaced atomically; a symlink's target), never a
    folder, a FIFO or a device (``/dev/stdout``: leave ``--out`` out), nor a tape, lock or journal of the tapes
    folder or its changelog (replacing a golden would change it with no changelog entry; a new ``.jsonl`` there is
    read as a tape).

    Raises:
        TapeError: any of those, naming the path.
    """
    try:
        st = given.stat()  # a symlink followed: its target is what would be written
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise TapeError(f"{given}: cannot write the spans there: {e.strerror or e}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise TapeError(f"{given}: --out must be a file to write the spans to, and this is a folder")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise TapeError(
            f"{given}: not a regular file ({file_kind(st.st_mode)}); --out writes a file (leave it out to write "
            "the spans to standard output)"
        )
    target = resolved(given)
    if not target.parent.is_dir():
        raise TapeError(f"{given}: no folder {target.parent} to write the spans in")
    own = (".jsonl", ".journal", ".torn", ".tmp")  # tapes, journals, torn tails set aside, atomic writes' temps
    kept = {resolved(cfg.changelog), *((resolved(cfg.path),) if cfg.path is not None else ())}
    if target in kept or (
        inside(cfg.tapes_dir, target) is not None and (target.name.endswith(own) or target.name.startswith("."))
    ):
        raise TapeError(
            f"{given}: a file of the tapes folder {cfg.tapes_dir} (a tape, journal, torn tail or lock), its changelog "
            "or tapes.toml: --out writes the spans to another name (e.g. .json) or elsewhere"
        )
    return target


def cmd_export(args: argparse.Namespace) -> int:
    """``tapetui export otlp TAPE...`` (see tapetui.traces.export)."""
    # deferred: as in cmd_import
    from tapetui.traces.export import export_otlp

    cfg = _config(args)
    tapes: list[Path] = []
    logs: list[Path | None] = []
    goldens: list[Path | None] = []
    for name in args.tapes:
        given = Path(name)
        golden = golden_of(given) if name.endswith((".run.jsonl", ".candidate.jsonl")) and given.is_file() else None
        if golden is not None and name.endswith(".run.jsonl"):  # a run log: the golden's spans with its outcomes
            tapes.append(golden)
            logs.append(given)
            goldens.append(None)
        elif golden is not None and golden.is_file():  # a candidate: its spans with its comparison's outcomes
            tapes.append(given)
            logs.append(None)
            goldens.append(golden)
        else:
            tapes.append(session_tape(cfg, name))
            logs.append(None)
            goldens.append(None)
    if args.out is None:
        for line in export_otlp(tapes, run_logs=logs, goldens=goldens, config=cfg):
            # a CI job's log runs no "##[command]" from a tape's text (the same JSON: "[" as \u005b)
            sys.stdout.buffer.write(inert_json_commands(line.decode()).encode())
        sys.stdout.flush()
        return 0
    out = _export_target(args.out, cfg)
    data = b"".join(export_otlp(tapes, run_logs=logs, goldens=goldens, config=cfg))  # all read before the write
    atomic_write(out, data)
    Out(sys.stderr).line(f"wrote {len(tapes)} trace(s) to {args.out}")
    return 0


def _commands() -> dict[str, cli_parser.Command]:
    """Each subcommand's function, looked up when the command line is parsed."""
    return {
        "check": cmd_check,
        "diff": cmd_diff,
        "stats": cmd_stats,
        "pending": cmd_pending,
        "accept": cmd_accept,
        "reject": cmd_reject,
        "expire": cmd_expire,
        "undo": cmd_undo,
        "rerecord": cmd_rerecord,
        "replay": cmd_replay,
        "recover": cmd_recover,
        "scrub": cmd_scrub,
        "mcp": cmd_mcp,
        "import": cmd_import,
        "export": cmd_export,
    }


class _Usage(Exception):
    pass


def _ui(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="tapetui",
        description="Open the review app on a tapes folder. "
        f"Subcommands: {', '.join(SUBCOMMANDS)} (tapetui COMMAND --help). "
        "A folder named like a subcommand opens with a path: tapetui ./undo",
    )
    ap.add_argument(
        "dir",
        nargs="?",
        help="tapes folder (default: the tapes dir of ./tapes.toml); one named like a subcommand: ./NAME",
    )
    ap.add_argument("--config", help="tapes.toml to use")
    ap.add_argument("--version", action=cli_parser.VersionAction)
    args = ap.parse_args(argv)
    cfg = _config(args, args.dir)
    if not cfg.tapes_dir.is_dir():
        raise TapeError(
            f"no tapes found in {cfg.tapes_dir}: no such folder (tapes.toml: {cfg.path or 'none found'}); "
            "name the folder your tapes are in, or record one first"
        )
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise _Usage("no terminal: the app needs an interactive terminal (try `tapetui check` in scripts)")
    try:
        # deferred: textual is heavy, and only the app needs it (scripts and CI never load it)
        from tapetui.tui.app import TapeApp
    except ImportError as e:  # pragma: no cover - textual is a base dependency
        raise TapeError(f"the terminal UI cannot start: {e}") from None
    TapeApp(cfg).run()
    return 0


def _first_word(argv: Sequence[str]) -> str | None:
    """The first argument that is not an option or the value of ``--config``: a subcommand, or the folder."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--config":
            skip = True
        elif a == "--" or not a.startswith("-"):
            return None if a == "--" else a
    return None


def run() -> NoReturn:
    """The ``tapetui`` command: :func:`main`, then the process ends with its exit code.

    SIGTERM (what a CI job's timeout sends) ends it as Ctrl-C does, through every ``finally``: a command it
    runs is killed, a parked candidate put back, a lock released — never a process left behind.
    """
    signal.signal(signal.SIGTERM, _terminated)
    code = main()
    if hooks_running():  # a comparison hook that never answered still runs in a daemon thread: end now,
        # without the interpreter's shutdown (a daemon thread writing while the interpreter is torn down can
        # crash it), after what was written is out
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    err = Out(sys.stderr)
    with warnings.catch_warnings():  # a warning (a tapes.toml passed over) is one line saying so, not Python's two

        def warned(message: Warning | str, *_: Any, **__: Any) -> None:
            err.line(DEFAULT_REDACTOR.redact_text(f"tapetui: warning: {message}"), "yellow")

        warnings.showwarning = warned
        return _main(argv, err)


def _main(argv: list[str], err: Out) -> int:
    try:
        first = _first_word(argv)
        if first in SUBCOMMANDS:
            args = cli_parser.parse(cli_parser.parser(_commands()), argv)
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
    except OSError as e:  # a last guard: every reader turns these into a TapeError naming the file
        where = f"{e.filename}: " if e.filename is not None else ""
        # its text may come from anywhere (a traced error's message): said redacted, as every other error is
        err.line(DEFAULT_REDACTOR.redact_text(f"tapetui: {where}{e.strerror or e}"), "red")
        return 2


if __name__ == "__main__":
    run()
