"""The review workflow over tapes: compare, check, diff, the commit journal, the actions, undo.

Import from here (``from tapetui import review``; ``review.accept(...)``). One module per noun:

- :mod:`.comparison` — a golden against another tape (``LoadedTape``, ``StepDiff``, ``Comparison``);
- :mod:`.findings` — findings of a session (run log, stored keys, candidate) and ``check`` of a folder;
- :mod:`.diffs` — one ``diff`` for ``tapetui diff`` and the app;
- :mod:`.journal` — the commit protocol (a golden never changes without its changelog entry) and ``recover``;
- :mod:`.history` — the bytes each change replaced, under ``.tapetui/history/``;
- :mod:`.actions` — accept, accept-all, reject, expire, restore; :mod:`.revert` — undo from any process;
- :mod:`.rerecording`, :mod:`.replay`, :mod:`.counts`, :mod:`.scrub`, :mod:`.changelog`, :mod:`.textdiff`.
"""

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
from tapetui.review.rerecording import load_registry, rerecord
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
