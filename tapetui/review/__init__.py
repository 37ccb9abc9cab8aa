"""The review workflow over tapes: compare, check, diff, the commit journal, the actions, undo.

Import from here (``from tapetui import review``; ``review.accept(...)``). One module per noun:

- :mod:`.comparison` — a golden against another tape (``LoadedTape``, ``StepDiff``, ``Comparison``);
- :mod:`.findings` — findings of a session (run log, stored keys, candidate) and ``check`` of a folder;
- :mod:`.diffs` — one ``diff`` for ``tapetui diff`` and the app;
- :mod:`.journal` — the commit protocol (a golden never changes without its changelog entry) and ``recover``;
- :mod:`.history` — the bytes each change replaced, under ``.tapetui/history/``;
- :mod:`.actions` — accept, accept-all, reject, expire, restore; :mod:`.revert` — undo from any process;
- :mod:`.rerecording`, :mod:`.replay`, :mod:`.counts`, :mod:`.scrub`, :mod:`.changelog`, :mod:`.textdiff`.

Nothing is imported with the package: each name on first use (PEP 562), so a command pays only for the
modules it uses (``check`` never imports the actions, the app never imports a recorder it does not run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tapetui.core.lazy import lazy_names

if TYPE_CHECKING:
    from tapetui.review.actions import (
        AlreadyExpired,
        BatchResult,
        accept,
        accept_all,
        expire,
        reject,
        restore,
        restore_candidate,
    )
    from tapetui.review.changelog import Entry
    from tapetui.review.comparison import (
        Comparison,
        HooksArg,
        LoadedTape,
        NoteDiff,
        RowLevel,
        StepDiff,
        StepKind,
        compare,
        load,
    )
    from tapetui.review.counts import stats, stats_of
    from tapetui.review.diffs import Diff, DiffLevel, DiffSource, diff
    from tapetui.review.findings import (
        Finding,
        FindingKind,
        Progress,
        SessionReport,
        check,
        check_session,
        compare_run,
        folder_sessions,
        golden_sha256,
        judge_run,
        no_tapes_message,
        pending,
        run_log_stale,
    )
    from tapetui.review.history import HistoryRecord
    from tapetui.review.journal import recover
    from tapetui.review.parking import LeftInPlace
    from tapetui.review.replay import (
        Command,
        CommandTimeout,
        quoted_output,
        record_argv,
        record_command,
        replay_argv,
        replay_command,
    )
    from tapetui.review.rerecording import load_registry, rerecord, rerecorded_message
    from tapetui.review.revert import undo, undo_target
    from tapetui.review.rules import RuleSpec, add_rule, check_rule, parse_rule_spec, suggest_rule
    from tapetui.review.samples import (
        SampleReport,
        SampleSource,
        add_samples,
        judge_samples,
        record_samples,
        session_samples,
    )
    from tapetui.review.verdicts import Verdict

_WHERE: dict[str, str] = {
    "AlreadyExpired": "tapetui.review.actions",
    "BatchResult": "tapetui.review.actions",
    "accept": "tapetui.review.actions",
    "accept_all": "tapetui.review.actions",
    "expire": "tapetui.review.actions",
    "reject": "tapetui.review.actions",
    "restore": "tapetui.review.actions",
    "restore_candidate": "tapetui.review.actions",
    "Entry": "tapetui.review.changelog",
    "Comparison": "tapetui.review.comparison",
    "HooksArg": "tapetui.review.comparison",
    "LoadedTape": "tapetui.review.comparison",
    "NoteDiff": "tapetui.review.comparison",
    "RowLevel": "tapetui.review.comparison",
    "StepDiff": "tapetui.review.comparison",
    "StepKind": "tapetui.review.comparison",
    "compare": "tapetui.review.comparison",
    "load": "tapetui.review.comparison",
    "stats": "tapetui.review.counts",
    "stats_of": "tapetui.review.counts",
    "Diff": "tapetui.review.diffs",
    "DiffLevel": "tapetui.review.diffs",
    "DiffSource": "tapetui.review.diffs",
    "diff": "tapetui.review.diffs",
    "Finding": "tapetui.review.findings",
    "FindingKind": "tapetui.review.findings",
    "Progress": "tapetui.review.findings",
    "SessionReport": "tapetui.review.findings",
    "check": "tapetui.review.findings",
    "check_session": "tapetui.review.findings",
    "compare_run": "tapetui.review.findings",
    "folder_sessions": "tapetui.review.findings",
    "golden_sha256": "tapetui.review.findings",
    "judge_run": "tapetui.review.findings",
    "no_tapes_message": "tapetui.review.findings",
    "pending": "tapetui.review.findings",
    "run_log_stale": "tapetui.review.findings",
    "HistoryRecord": "tapetui.review.history",
    "recover": "tapetui.review.journal",
    "LeftInPlace": "tapetui.review.parking",
    "Command": "tapetui.review.replay",
    "CommandTimeout": "tapetui.review.replay",
    "quoted_output": "tapetui.review.replay",
    "record_argv": "tapetui.review.replay",
    "record_command": "tapetui.review.replay",
    "replay_argv": "tapetui.review.replay",
    "replay_command": "tapetui.review.replay",
    "load_registry": "tapetui.review.rerecording",
    "rerecord": "tapetui.review.rerecording",
    "rerecorded_message": "tapetui.review.rerecording",
    "undo": "tapetui.review.revert",
    "undo_target": "tapetui.review.revert",
    "RuleSpec": "tapetui.review.rules",
    "add_rule": "tapetui.review.rules",
    "check_rule": "tapetui.review.rules",
    "parse_rule_spec": "tapetui.review.rules",
    "suggest_rule": "tapetui.review.rules",
    "SampleReport": "tapetui.review.samples",
    "SampleSource": "tapetui.review.samples",
    "add_samples": "tapetui.review.samples",
    "judge_samples": "tapetui.review.samples",
    "record_samples": "tapetui.review.samples",
    "session_samples": "tapetui.review.samples",
    "Verdict": "tapetui.review.verdicts",
}

__all__ = [
    "AlreadyExpired",
    "BatchResult",
    "Command",
    "CommandTimeout",
    "Comparison",
    "Diff",
    "DiffLevel",
    "DiffSource",
    "Entry",
    "Finding",
    "FindingKind",
    "HistoryRecord",
    "HooksArg",
    "LeftInPlace",
    "LoadedTape",
    "NoteDiff",
    "Progress",
    "RowLevel",
    "RuleSpec",
    "SampleReport",
    "SampleSource",
    "SessionReport",
    "StepDiff",
    "StepKind",
    "Verdict",
    "accept",
    "accept_all",
    "add_rule",
    "add_samples",
    "check",
    "check_rule",
    "check_session",
    "compare",
    "compare_run",
    "diff",
    "expire",
    "folder_sessions",
    "golden_sha256",
    "judge_run",
    "judge_samples",
    "load",
    "load_registry",
    "no_tapes_message",
    "parse_rule_spec",
    "pending",
    "quoted_output",
    "record_argv",
    "record_command",
    "record_samples",
    "recover",
    "reject",
    "replay_argv",
    "replay_command",
    "rerecord",
    "rerecorded_message",
    "restore",
    "restore_candidate",
    "run_log_stale",
    "session_samples",
    "stats",
    "stats_of",
    "suggest_rule",
    "undo",
    "undo_target",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE, __all__)
