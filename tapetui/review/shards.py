"""``tapetui check --shard K/N`` and ``--merge``: one folder's check split over CI runners, and their reports made one.

A session belongs to shard ``1 + int(sha256(name)) % N`` (its name relative to the tapes folder): every runner
computes the same split with no list to share, and adding a session moves no other. Each shard's ``--json`` report
carries its identity (:func:`identity`): the report format, the tapetui version, the tapes folder relative to the
project, ``shard: {k, n}`` and a digest of every session name of the folder. ``--merge`` combines the reports of
all N shards into one verdict, and refuses (exit 2) reports of another folder, version or session list, a shard
given twice, a missing shard, and a report that is not one: a merge is never green by leaving something out.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import orjson

from tapetui.core.changes import json_name
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import file_sha256, open_regular
from tapetui.review.comparison import RowLevel
from tapetui.review.finding import Finding
from tapetui.review.findings import SessionReport
from tapetui.review.verdicts import Verdict

__all__ = ["REPORT_FORMAT", "Merged", "identity", "in_shard", "merge", "parse_shard"]

REPORT_FORMAT = 3  # check's --json report format (its identity; 2: files_digest; 3: config_digest, require_run)
MAX_SHARDS = 10_000


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(k, n)``, 1 ≤ k ≤ n.

    Raises:
        TapeError: anything else, saying what a shard is.
    """
    k_text, _, n_text = text.partition("/")
    ok = k_text.isascii() and k_text.isdigit() and n_text.isascii() and n_text.isdigit()
    k, n = (int(k_text), int(n_text)) if ok and len(k_text) < 7 and len(n_text) < 7 else (0, 0)
    if not 1 <= k <= n <= MAX_SHARDS:
        raise TapeError(
            f"--shard takes K/N, this runner's shard K of N (1 ≤ K ≤ N ≤ {MAX_SHARDS:,}), got {text[:40]!r}"
        )
    return k, n


def in_shard(name: str, k: int, n: int) -> bool:
    """Whether session ``name`` is in shard ``k`` of ``n``."""
    return 1 + int.from_bytes(hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()[:8], "big") % n == k


def identity(
    tapes_dir: Path,
    config: Config,
    names: Iterable[str],
    version: str,
    shard: tuple[int, int],
    *,
    require_run: bool = False,
) -> dict[str, Any]:
    """What a shard's report says of itself, for :func:`merge` to check (its own files: :func:`files_digest`): the
    report format, this tapetui's version, the folder, the shard, a digest of every session name of the folder, a
    digest of the ``tapes.toml`` it was checked under (its rules decide the verdicts) and ``require_run``."""
    digest = hashlib.sha256("\n".join(sorted(names)).encode("utf-8", "surrogateescape")).hexdigest()
    try:
        folder = os.path.relpath(tapes_dir, config.root)
    except ValueError:
        folder = str(tapes_dir)
    return {
        "format": REPORT_FORMAT,
        "tapetui": version,
        "folder": folder,
        "shard": {"k": shard[0], "n": shard[1]},
        "sessions_digest": digest,
        "config_digest": config_digest(config),
        "require_run": require_run,
    }


def config_digest(config: Config) -> str:
    """The sha256 of the bytes of the ``tapes.toml`` in force (``-`` for none, ``?`` for one that cannot be read)."""
    if config.path is None:
        return "-"
    return file_sha256(config.path, follow_symlinks=True) or "?"


def files_digest(sessions: dict[str, Path]) -> str:
    """A digest of what a shard checked: each session's name with the sha256 of its golden's bytes (``-`` for none).
    ``--merge`` computes it again from its checkout: a report of another commit of the same session names is
    refused. Goldens only: a shard's job may write candidates and run logs (a fill, a replay) before it checks."""
    h = hashlib.sha256()
    for name in sorted(sessions):
        golden = file_sha256(sessions[name], follow_symlinks=True)  # a symlinked golden: what it points at
        h.update(f"{name}\0{golden or '-'}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


@dataclass(frozen=True)
class Merged:
    """The reports of every shard as one."""

    sessions: int
    failing: int
    reports: list[dict[str, Any]]  # the sessions with findings, from every shard, in the order check lists them
    shards: int
    folder: str = ""  # the tapes folder, relative to the project (as every shard's report says)
    errors: int = 0  # sessions a shard could not read (as check, the merge then exits 2)
    goldens: tuple[tuple[str, Path], ...] = ()  # each report's session and its golden in this checkout, in order

    def session_reports(self) -> list[SessionReport]:
        """The reports as :class:`SessionReport` values (for ``--format junit|github|markdown``), each with its
        session's name and golden in this checkout; every value from a report file is taken as data, as text."""
        out = []
        for r, (session, golden) in zip(self.reports, self.goldens, strict=True):
            error = r.get("error")
            rep = SessionReport(session, golden, error=None if error is None else str(error))
            rep.findings = [_finding(f) for f in r.get("findings") or [] if isinstance(f, dict)]
            run = r.get("run")
            dims = run.get("dimensions") if isinstance(run, dict) else None
            if isinstance(dims, dict):
                rep.run_verdicts = tuple(v for d, j in dims.items() if (v := _verdict(str(d), j)) is not None)
            out.append(rep)
        return out

    @property
    def ok(self) -> bool:
        return self.failing == 0 and self.errors == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "sessions": self.sessions,
            "failing": self.failing,
            "shards": self.shards,
            "reports": self.reports,
        }


_KEYS = ("format", "tapetui", "folder", "sessions_digest", "config_digest")


_FIXED = ("kind", "seq", "tool", "text", "warning", "level")


def _finding(f: dict[str, Any]) -> Finding:
    seq, tool, level = f.get("seq"), f.get("tool"), f.get("level")
    return Finding(
        str(f.get("kind", "")),  # type: ignore[arg-type]  # a kind from the report: shown, never acted on
        str(f.get("text", "")),
        seq if type(seq) is int else None,
        tool if isinstance(tool, str) else None,
        {k: v for k, v in f.items() if k not in _FIXED},
        f.get("warning") is True,
        level if level in get_args(RowLevel) else None,
    )


def _verdict(dimension: str, j: Any) -> Verdict | None:
    if not isinstance(j, dict) or not all(type(j.get(k)) is int for k in ("value", "threshold", "excused", "errors")):
        return None
    mode = j.get("mode")
    return Verdict(
        dimension,
        j["value"],
        j["threshold"],
        j["excused"],
        j["errors"],
        mode if isinstance(mode, str) else None,
        j.get("judged") is not False,
    )


def merge(paths: Sequence[Path], expected: dict[str, Any], goldens: dict[str, Path]) -> Merged:
    """The reports at ``paths`` (each a shard's ``--json``) as one verdict.

    ``expected``: the :func:`identity` of the folder in this checkout (its ``shard`` ignored), which every report
    must carry: the same report format, this tapetui's version, this folder and its sessions (``goldens``: each
    session's golden here). Nothing a report says is taken on trust that can be checked: its shard's sessions and
    their files must be this checkout's (:func:`files_digest`); each session it lists must be one of its shard,
    listed once; its ``ok`` must follow from its error and findings, its ``failing`` count from its sessions.
    What cannot be checked without checking again is the findings themselves: a report is its own job's artifact.

    Raises:
        TapeError: a file that is not a shard's report (naming it, and the entry), reports of another folder,
            version or session list, a shard given twice, or a missing shard.
    """
    if not paths:
        raise TapeError("--merge needs the --json report of every shard")
    seen: dict[int, Path] = {}
    first: dict[str, Any] | None = None
    first_path: Path | None = None
    sessions = failing = errors = 0
    reports: list[tuple[str, dict[str, Any]]] = []
    listed: dict[str, Path] = {}
    named: dict[str, list[str]] = {}  # a name as the reports' JSON holds it → the names written so (one, nearly always)
    for name in goldens:
        named.setdefault(json_name(name), []).append(name)
    for p in paths:
        doc = _read(p)
        shard = doc["shard"]
        _same_folder(p, doc, expected)
        if first is None:
            first, first_path = doc, p
        _same_check(p, doc, first_path, first)
        if shard["k"] in seen:
            raise TapeError(f"{p}: shard {shard['k']}/{shard['n']} again (it is {seen[shard['k']]} too)")
        seen[shard["k"]] = p
        _same_files(p, doc, goldens)
        own_failing = 0
        for i, r in enumerate(doc["reports"]):
            name = _entry(p, i, r, shard["k"], shard["n"], named, listed)
            listed[name] = p
            own_failing += not r["ok"]
            errors += r["error"] is not None
            reports.append((name, r))
        if doc["failing"] != own_failing or not own_failing <= len(doc["reports"]) <= doc["sessions"]:
            raise TapeError(
                f"{p}: says {doc['failing']} of {doc['sessions']} session(s) fail, and lists {own_failing} failing "
                f"of {len(doc['reports'])}: not a report as check writes it"
            )
        sessions += doc["sessions"]
        failing += own_failing
    assert first is not None
    n = first["shard"]["n"]
    missing = [k for k in range(1, n + 1) if k not in seen]
    if missing:
        raise TapeError(
            f"shard(s) {', '.join(f'{k}/{n}' for k in missing)} missing: a merge of some shards is no verdict "
            "(give every shard's report)"
        )
    if sessions != len(goldens):
        raise TapeError(
            f"the shards' reports count {sessions} session(s), and the folder holds {len(goldens)}: "
            "not the reports of one check of it"
        )
    order = {name: i for i, name in enumerate(goldens)}  # the order check lists the sessions in
    reports.sort(key=lambda named_report: order[named_report[0]])
    return Merged(
        sessions=sessions,
        failing=failing,
        reports=[r for _, r in reports],
        shards=n,
        folder=str(first["folder"]),
        errors=errors,
        goldens=tuple((name, goldens[name]) for name, _ in reports),
    )


def _same_check(p: Path, doc: dict[str, Any], first_path: Path | None, first: dict[str, Any]) -> None:
    """Refuse a report of another split (N) or other options than the first report given."""
    shard = doc["shard"]
    if shard["n"] != first["shard"]["n"]:
        raise TapeError(f"{p}: shard {shard['k']}/{shard['n']}, and {first_path} is of {first['shard']['n']} shards")
    if doc["require_run"] != first["require_run"]:
        given = {True: "with --require-run", False: "without --require-run"}
        raise TapeError(
            f"{p}: checked {given[doc['require_run']]}, and {first_path} {given[first['require_run']]}: the "
            "shards of one check are merged, under one set of options"
        )


def _same_folder(p: Path, doc: dict[str, Any], expected: dict[str, Any]) -> None:
    """Refuse a report of another format, tapetui version, folder or list of sessions than ``expected`` (here)."""
    for key in _KEYS:
        if key == "sessions_digest" and doc[key] != expected[key]:
            raise TapeError(
                f"{p}: its sessions are not this folder's (a session added, removed or renamed since the shards "
                "ran, or another folder): the reports of one check of this folder are merged, no others"
            )
        if key == "config_digest" and doc[key] != expected[key]:
            raise TapeError(
                f"{p}: checked under another tapes.toml than this checkout's (its rules decide the verdicts): the "
                "reports of one check of this folder, under one config, are merged, no others"
            )
        if doc[key] != expected[key]:
            raise TapeError(
                f"{p}: its {key} is {str(doc[key])[:80]!r}, and here it is {str(expected[key])[:80]!r}: "
                "the reports of one check of this folder, by this tapetui version, are merged, no others"
            )


def _same_files(p: Path, doc: dict[str, Any], goldens: dict[str, Path]) -> None:
    """Refuse a shard's report whose session count or goldens (:func:`files_digest`) are not its shard's here."""
    k, n = doc["shard"]["k"], doc["shard"]["n"]
    mine = {name: g for name, g in goldens.items() if in_shard(name, k, n)}
    if doc["sessions"] != len(mine):
        raise TapeError(
            f"{p}: shard {k}/{n} says it checked {doc['sessions']} session(s), and it has {len(mine)} here: an "
            "edited report"
        )
    if doc.get("files_digest") != files_digest(mine):
        raise TapeError(
            f"{p}: the goldens shard {k}/{n} checked are not this checkout's (another commit, or an edited report)"
        )


def _entry(p: Path, i: int, r: Any, k: int, n: int, named: dict[str, list[str]], listed: dict[str, Path]) -> str:
    """The session a report's entry ``reports[i]`` is of, once its fields are checked (as check writes them, of a
    session of this folder (``named``: each as the JSON holds it) in shard ``k`` of ``n``, not ``listed`` before;
    its ``ok`` as its error and findings make it)."""
    where = f"{p}: reports[{i}]"
    if not isinstance(r, dict):
        raise TapeError(f"{where}: not a session's report (an object), got {type(r).__name__}")
    shown, error, findings = r.get("session"), r.get("error"), r.get("findings")
    names = named.get(shown, []) if isinstance(shown, str) else []
    if not names:
        raise TapeError(f"{where}: 'session' must be the name of a session of this folder, got {str(shown)[:60]!r}")
    mine = [name for name in names if in_shard(name, k, n)]
    if not mine:
        raise TapeError(f"{where}: 'session' must be the name of a session of shard {k}/{n}, got {str(shown)[:60]!r}")
    # names JSON writes alike (a name that is not UTF-8, another with that escape as its text) come in check's order
    name = next((name for name in mine if name not in listed), None)
    if name is None:
        raise TapeError(f"{where}: session {str(shown)[:60]!r} again (it is in {listed[mine[-1]]} too)")
    if (
        "error" not in r
        or type(r.get("ok")) is not bool
        or not (error is None or (isinstance(error, str) and error))
        or not isinstance(findings, list)
    ):
        raise TapeError(f"{where}: 'ok', 'error' and 'findings' are not what check writes")
    for j, f in enumerate(findings):
        if not (
            isinstance(f, dict)
            and isinstance(f.get("kind"), str)
            and isinstance(f.get("text"), str)
            and type(f.get("warning", False)) is bool
        ):
            raise TapeError(f"{where}: findings[{j}] is not a finding as check writes it (kind, text, warning)")
    ok = error is None and not any(f.get("warning") is not True for f in findings)
    if r["ok"] != ok:
        raise TapeError(f"{where}: says ok is {r['ok']}, and its error and findings say {ok}")
    return name


MAX_REPORT = 256 << 20  # bytes: a report of 100,000 sessions with findings is a few tens of MB


def _read(p: Path) -> Any:
    try:
        fd = open_regular(p, "report")  # a FIFO or a device named like a report: refused, never waited on
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_REPORT + 1)
    except OSError as e:
        raise TapeError(f"{p}: cannot read the report: {e.strerror or e}") from None
    if len(raw) > MAX_REPORT:
        raise TapeError(f"{p}: more than {MAX_REPORT:,} bytes: not a check report")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise TapeError(
            f"{p}: not a check report (not JSON: {e.msg} at character {e.pos}; a truncated file?)"
        ) from None
    shard = doc.get("shard") if isinstance(doc, dict) else None
    fields = (*_KEYS, "sessions", "failing", "reports", "require_run")
    fields_ok = isinstance(doc, dict) and all(k in doc for k in fields)
    if not fields_ok or not isinstance(shard, dict):
        raise TapeError(f"{p}: not a shard's check report (made by `tapetui check --shard K/N --json`)")
    if doc["format"] != REPORT_FORMAT:
        raise TapeError(f"{p}: report format {doc['format']!r}; this tapetui reads format {REPORT_FORMAT}")
    k: Any = shard.get("k")
    n: Any = shard.get("n")
    numbers = [doc["sessions"], doc["failing"], k, n]
    if (
        not all(type(v) is int for v in numbers)
        or type(doc["require_run"]) is not bool
        or not isinstance(doc["reports"], list)
        or not 1 <= k <= n <= MAX_SHARDS
    ):
        raise TapeError(f"{p}: a check report whose counts, shard or reports are not what check writes")
    return doc
