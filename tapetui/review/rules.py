"""Adding a per-path comparison rule to ``tapes.toml`` from a review (``accept --rule``, the app's accept).

A rule is written as ``KIND:PATH[=VALUE]``: ``ignore:result.debug``, ``tolerance:result.price=0.01``,
``tolerance:quote_price:result.price=2%`` (scoped to one tool), ``unordered:result.sources``,
``regex:args.query=^weather``, ``similarity:note.final=0.6``, ``judge:note.final``. It goes into the
session's own table, ``[compare.sessions."SESSION".rules]``, so it changes how that session is compared
and no other; move it to ``[compare.rules]`` by hand to apply it everywhere.

Protocol: the changelog entry is appended first, then ``tapes.toml`` is replaced atomically (tomlkit
keeps its comments and layout), both under an exclusive ``flock`` on ``.tapes.toml.lock`` beside it, so
two reviewers adding rules at once never lose one. A kill between the two leaves an entry that names a
rule the file lacks (visible, harmless), never a rule without its entry.
"""

from __future__ import annotations

import fcntl
import glob
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.exceptions import ParseError
from tomlkit.items import Table

from tapetui.core.comparators import RULE_KINDS, Rule, parse_rule
from tapetui.core.config import Config, config_from_text
from tapetui.core.errors import ConfigError, TapeError
from tapetui.core.files import atomic_write, read_regular
from tapetui.core.locks import unlock_close
from tapetui.core.store import session_name
from tapetui.review.changelog import Entry, append_entry
from tapetui.review.journal import new_entry

__all__ = ["RuleSpec", "add_rule", "check_rule", "parse_rule_spec", "suggest_rule"]


class RuleSpec:
    """A parsed ``KIND:PATH[=VALUE]``: the ``tapes.toml`` key and value, and the rule they make."""

    def __init__(self, key: str, value: Any, rule: Rule) -> None:
        self.key, self.value, self.rule = key, value, rule

    def toml_text(self) -> str:
        """``"result.price" = { tolerance = 0.01 }``, as it is written."""
        doc = tomlkit.document()
        doc[self.key] = _toml_value(self.value)
        return tomlkit.dumps(doc).strip()


def parse_rule_spec(spec: str) -> RuleSpec:
    """``KIND:PATH[=VALUE]`` → :class:`RuleSpec`.

    Raises:
        ConfigError: an unknown comparator, a path that cannot match, a missing or bad value.
    """
    where = f"rule {spec!r}"
    kind, sep, rest = spec.partition(":")
    kind = kind.strip()
    if not sep or not rest.strip():
        raise ConfigError(f"{where}: expected KIND:PATH[=VALUE], e.g. tolerance:result.price=0.01")
    if kind not in RULE_KINDS:
        raise ConfigError(f"{where}: unknown comparator {kind!r} (known: {', '.join(RULE_KINDS)})")
    path, eq, raw = rest.partition("=")
    path = path.strip()
    value: Any
    if kind in ("unordered", "judge", "ignore"):
        if eq:
            raise ConfigError(f"{where}: {kind} takes no value (write {kind}:{path})")
        value = kind
    elif not eq or not raw.strip():
        example = {"tolerance": "0.01 or 2%", "regex": "^a pattern", "similarity": "0.8"}[kind]
        raise ConfigError(f"{where}: {kind} needs a value: {kind}:{path}={example}")
    elif kind == "regex":
        value = {"regex": raw}
    elif kind == "tolerance" and raw.strip().endswith("%"):
        value = {"tolerance": raw.strip()}
    else:
        try:
            number: float | int = int(raw) if raw.strip().isdigit() else float(raw)  # 50 stays 50 in tapes.toml
        except ValueError:
            raise ConfigError(f"{where}: {kind} needs a number, got {raw!r}") from None
        value = {kind: number}
    return RuleSpec(path, value, parse_rule(path, value, where))


def suggest_rule(path: str, old: Any, new: Any, tool: str | None = None) -> str:
    """A rule that would excuse ``old → new`` at ``path`` (``args.x``, ``result.y``) of ``tool``'s calls (scoped
    to that tool when given): what the app offers.

    Numbers get a tolerance of the difference (an integer argument, such as a count the model chose, does
    not: it is suggested as ``ignore``, for the person to think twice); lists ``unordered``; long text
    ``similarity``; anything else ``ignore``."""
    at = f"{tool}:{path}" if tool and ":" not in tool and tool == tool.strip() and tool else path
    numbers = type(old) in (int, float) and type(new) in (int, float)
    if numbers and (not path.startswith("args") or float in (type(old), type(new))):  # a count argument is a choice
        diff = abs(float(new) - float(old))
        return f"tolerance:{at}={float(f'{diff:.2g}') or 0.0:g}"
    if isinstance(old, list) and isinstance(new, list):
        return f"unordered:{at}"
    if isinstance(old, str) and isinstance(new, str) and len(old) > 40:
        return f"similarity:{at}=0.8"
    return f"ignore:{at}"


def _toml_value(value: Any) -> Any:
    if isinstance(value, dict):
        t = tomlkit.inline_table()
        t.update(value)
        return t
    return value


@contextmanager
def _config_lock(path: Path) -> Iterator[None]:
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        unlock_close(fd)


def add_rule(config: Config, golden: Path, spec: str | RuleSpec, why: str | None) -> tuple[Entry | None, Config, str]:
    """Add a rule to ``[compare.sessions."SESSION".rules]`` of ``tapes.toml``, with a changelog entry.

    Returns the entry (None when the same rule is there already: the file is not rewritten and nothing is
    logged), the configuration as the file now reads, and what was done, in words.

    Raises:
        TapeError: no rationale, no tapes.toml, or a file that cannot be read or parsed.
        ConfigError: a bad rule, or a tapes.toml the rule cannot go into (see :func:`check_rule`).
    """
    if why is None or not why.strip():
        raise TapeError("a rule needs a rationale (--why TEXT): the changelog records why a comparison changed")
    parsed = spec if isinstance(spec, RuleSpec) else parse_rule_spec(spec)
    path = _config_path(config)
    with _config_lock(path):
        text, new_config, detail = _edited(config, path, golden, parsed)
        if text is None:
            return None, new_config, detail
        entry = new_entry("rule", config, golden, [], [detail], why)
        append_entry(config.changelog, entry, config.redactor())
        atomic_write(path, text.encode("utf-8"))
    return entry, new_config, detail


def check_rule(config: Config, golden: Path, spec: str | RuleSpec) -> RuleSpec:
    """What :func:`add_rule` would do, done in memory only: whether the rule can go into tapes.toml (a caller
    that changes something else first checks every rule with it, so nothing is left half done).

    Raises:
        TapeError, ConfigError: as :func:`add_rule` would.
    """
    parsed = spec if isinstance(spec, RuleSpec) else parse_rule_spec(spec)
    _edited(config, _config_path(config), golden, parsed)
    return parsed


def _config_path(config: Config) -> Path:
    if config.path is None:
        raise TapeError(
            "no tapes.toml to add the rule to: create one in the project folder ([tapes] dir = ...) and try again"
        )
    return config.path


def _edited(config: Config, path: Path, golden: Path, parsed: RuleSpec) -> tuple[str | None, Config, str]:
    """tapes.toml's text with the rule in it (None: the same rule is there already, nothing to write), the
    configuration it makes, and the changelog line."""
    session = glob.escape(session_name(Path(golden), config.tapes_dir))  # a pattern naming this session alone
    try:
        doc = tomlkit.parse(read_regular(path, "tapes.toml").decode("utf-8"))
        tables: Any = doc
        chain = ("compare", "sessions", session, "rules")
        for depth, key in enumerate(chain, 1):
            inner = tables.get(key)
            if inner is None:
                inner = tables[key] = tomlkit.table(is_super_table=key != "rules")
            if not isinstance(inner, (Table, OutOfOrderTableProxy)):  # written inline ({ ... }), or not a table
                raise ConfigError(
                    f"{path}: cannot add the rule: '{'.'.join(chain[:depth])}' is written inline ({{ ... }}) or is "
                    "not a table; write it as a [section] of its own"
                )
            tables = inner
        replaced = parsed.key in tables
        where = f'[compare.sessions."{session}".rules]'
        if replaced and _plain(tables[parsed.key]) == _plain(parsed.value):  # the same rule: the file stays as it is
            return None, config, f"unchanged in {path.name} {where}: {parsed.toml_text()} (it is there already)"
        tables[parsed.key] = _toml_value(parsed.value)
        text = tomlkit.dumps(doc)
    except (ParseError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot add the rule: {e}") from None
    detail = f"{'replaced' if replaced else 'added'} in {path.name} {where}: {parsed.toml_text()}"
    return text, config_from_text(text, path), detail  # checked before it replaces the file


def _plain(value: Any) -> Any:
    """A TOML value as plain Python (tomlkit's items unwrapped), to tell the same rule from another."""
    return value.unwrap() if hasattr(value, "unwrap") else value
