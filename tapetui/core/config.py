"""``tapes.toml``: where tapes live, how to redact, diff and replay them, per-tool policy.

Read with tomlkit (not tomllib) so that edits the app makes keep a person's comments.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import stat
import warnings
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError

from tapetui.core.comparators import CompareSettings, Rules, compare_settings
from tapetui.core.errors import ConfigError, TapeError
from tapetui.core.files import read_regular
from tapetui.core.fingerprint import MANIFEST_FIELDS
from tapetui.core.jsondiff import IgnoreRules
from tapetui.core.redact import Redactor
from tapetui.core.store import inside, resolved

__all__ = [
    "CONFIG_NAME",
    "MAX_TTL",
    "STALE_POLICIES",
    "Config",
    "ModelPolicy",
    "ToolPolicy",
    "config_for_tape",
    "config_from_text",
    "find_config",
    "find_tape_config",
    "load_config",
    "parse_duration",
    "ttl_problem",
]

CONFIG_NAME = "tapes.toml"
STALE_POLICIES = ("warn", "miss", "error")


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How one tool is treated on replay."""

    live: bool = False
    ttl: float | None = None
    stale_policy: str | None = None
    check_fingerprint: bool = True
    fingerprint_ignore: tuple[str, ...] = ()


_DEFAULT_POLICY = ToolPolicy()


@dataclass(frozen=True, slots=True)
class ModelPolicy:
    """``[models."NAME"]``: a model's price (dollars per million tokens, input and output) and whether its turns
    run live on replay."""

    input_price: float | None = None
    output_price: float | None = None
    live: bool = False

    def cost(self, usage_input: int, usage_output: int) -> float | None:
        """What ``usage_input`` and ``usage_output`` tokens cost at this price (None without one)."""
        if self.input_price is None and self.output_price is None:
            return None
        return (usage_input * (self.input_price or 0.0) + usage_output * (self.output_price or 0.0)) / 1_000_000


@dataclass(frozen=True)
class Config:
    """Everything ``tapes.toml`` says, resolved against the folder it lives in."""

    root: Path
    tapes_dir: Path
    changelog: Path
    path: Path | None = None
    registry: str | None = None
    replay_command: str | None = None
    record_command: str | None = None
    command_timeout: float = 1800.0  # `[tapes] command_timeout`: how long record_command and replay_command may run
    stale_policy: str = "warn"
    ignore: tuple[str, ...] = ()
    volatile_defaults: bool = True
    redact_keys: tuple[str, ...] = ()
    redact_patterns: tuple[str, ...] = ()
    tools: dict[str, ToolPolicy] = field(default_factory=dict)
    fingerprint_ignored: tuple[str, ...] = ()  # `[fingerprint] ignore`, for every tool
    compare: CompareSettings = field(default_factory=CompareSettings)  # `[compare]`, every session
    compare_sessions: tuple[tuple[str, CompareSettings], ...] = ()  # `[compare.sessions."PATTERN"]`, in file order
    models: dict[str, ModelPolicy] = field(default_factory=dict)  # `[models."NAME"]`
    otel_enabled: bool = False  # `[otel] enabled`: every run emits live spans (tapetui.core.stepspans)

    def model_policy(self, name: str) -> ModelPolicy:
        """``[models."NAME"]`` for ``name`` (a pattern such as ``"openai:*"`` matches too), else the default."""
        found = self.models.get(name)
        if found is None:
            found = next((m for pat, m in self.models.items() if fnmatch.fnmatchcase(name, pat)), _DEFAULT_MODEL)
        return found

    @classmethod
    def for_dir(cls, tapes_dir: Path | str) -> Config:
        """Defaults for a tapes folder with no ``tapes.toml``."""
        d = resolved(Path(tapes_dir))
        return cls(root=d, tapes_dir=d, changelog=d / "CHANGELOG.md")

    def policy(self, tool: str) -> ToolPolicy:
        return self.tools.get(tool, _DEFAULT_POLICY)

    def fingerprint_ignore(self, tool: str) -> tuple[str, ...]:
        """The manifest fields left out when ``tool``'s contract is compared: ``[fingerprint] ignore``, then
        ``[tools.NAME] fingerprint_ignore``. Never applied to a stored fingerprint."""
        return self.fingerprint_ignored + self.policy(tool).fingerprint_ignore

    def redactor(self) -> Redactor:
        """The redactor of ``[redact]``: one per distinct configuration in this process, so the keys it has
        classified stay classified across the tapes a process opens (an import writes thousands)."""
        return _redactor(tuple(self.redact_keys), tuple(self.redact_patterns))

    def ignore_rules(self) -> IgnoreRules:
        return _rules(self.ignore, self.volatile_defaults)

    def replay_ignore(self) -> IgnoreRules:
        """``[diff] ignore`` as written, without the volatile defaults: what replay matching may excuse.

        The volatile defaults (``**.date``, ``**.timestamp``...) hide noise from diffs; an *argument*
        named ``date`` usually selects the data a tool returns, so a replay never serves a recording
        made for another one on their say-so."""
        return _rules(self.ignore, False)

    def compare_for(self, session: str) -> CompareSettings:
        """The comparison settings of one session: ``[compare]``, overridden by every
        ``[compare.sessions."PATTERN"]`` whose pattern (fnmatch) matches the session name, in file order;
        rules of a matching pattern come before the global ones (the first rule that excuses wins)."""
        out = self.compare
        for pattern, settings in self.compare_sessions:
            if fnmatch.fnmatchcase(session, pattern):
                out = out.overridden_by(settings)
        return out

    @property
    def rules(self) -> Rules:
        """Every rule of ``[compare.rules]`` (the global ones)."""
        return self.compare.rules


@lru_cache(maxsize=16)
def _rules(ignore: tuple[str, ...], volatile: bool) -> IgnoreRules:
    return IgnoreRules(ignore, volatile=volatile)


# key → (expected type(s), description)
_SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], str]]] = {
    "tapes": {
        "dir": ((str,), "a string"),
        "changelog": ((str,), "a string"),
        "registry": ((str,), "a string of the form module:attribute"),
        "replay_command": ((str,), "a string"),
        "record_command": ((str,), "a string"),
        "command_timeout": ((int, float, str), 'seconds, or a duration such as "30m", "1h"'),
        "stale_policy": ((str,), "one of warn, miss, error"),
    },
    "diff": {
        "ignore": ((list,), "a list of path patterns"),
        "volatile_defaults": ((bool,), "true or false"),
    },
    "redact": {
        "keys": ((list,), "a list of key names"),
        "patterns": ((list,), "a list of regular expressions"),
    },
    "fingerprint": {
        "ignore": ((list,), "a list of manifest field patterns"),
    },
    "otel": {
        "enabled": ((bool,), "true or false"),
    },
}
_TABLES = (*_SCHEMA, "tools", "compare", "models")
_TOOL_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "live": ((bool,), "true or false"),
    "ttl": ((int, float, str), 'seconds, or a duration such as "30m", "1h", "2d"'),
    "stale_policy": ((str,), "one of warn, miss, error"),
    "check_fingerprint": ((bool,), "true or false"),
    "fingerprint_ignore": ((list,), "a list of manifest field patterns"),
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNIT = {None: 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


_DEFAULT_MODEL = ModelPolicy()

MAX_TTL = 100 * 365 * 86400.0  # 100 years of 365 days, in seconds: longer is a typo, not a policy


@lru_cache(maxsize=8)  # a process has one configuration, or a few; each redactor holds a few MB at most
def _redactor(keys: tuple[str, ...], patterns: tuple[str, ...]) -> Redactor:
    return Redactor(keys, patterns)  # its rules never change; its key cache is a pure function of them


def _shown(value: Any) -> str:
    """``repr(value)``, short: a huge integer is described, not printed (or refused by Python's digit limit)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def ttl_problem(seconds: Any, given: Any = None) -> str | None:
    """What is wrong with a ttl in seconds (None when it is a usable one): it must be a finite,
    positive number of at most :data:`MAX_TTL` (100 years). ``given``: what the user wrote, when
    that was not ``seconds`` itself (``"2d"``)."""
    if type(seconds) in (int, float) and 0 < seconds <= MAX_TTL:  # the common case, checked on every live call
        return None
    got = f", got {_shown(seconds if given is None else given)}"
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return "a ttl must be a number of seconds" + got
    if isinstance(seconds, float) and math.isnan(seconds):
        return "a ttl must be a number of seconds, not NaN" + got
    if seconds <= 0:  # -inf too
        return "a ttl must be positive" + got
    if seconds > MAX_TTL:  # inf too
        return f"a ttl must be at most 100 years ({MAX_TTL:.0f} s)" + got
    return None


def parse_duration(value: Any, where: str, *, what: str = "a ttl") -> float:
    """Seconds from ``3600``, ``2.5`` or ``"30m"``/``"1h"``/``"2d"``/``"1w"``; ``what`` names it in messages.

    Raises:
        ConfigError: not a duration, or not a finite, positive one of at most 100 years.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        problem = ttl_problem(value)  # on the value itself: a huge int is never turned into a float
        if problem:
            raise ConfigError(f"{where}: {problem.replace('a ttl', what)}")
        return float(value)
    m = _DURATION.match(str(value))
    if not m:
        raise ConfigError(f'{where}: {_shown(value)} is not a duration (try 3600, "30m", "1h", "2d")')
    seconds = float(m.group(1)) * _UNIT[m.group(2)]  # float() of a long digit string is inf, never an error
    problem = ttl_problem(seconds, value)
    if problem:
        raise ConfigError(f"{where}: {problem.replace('a ttl', what)}")
    return seconds


MAX_COMMAND_TIMEOUT = 7 * 86400.0
"""The longest ``[tapes] command_timeout``: a week (the operating system's waits take no more than ~24 days)."""


def find_config(start: Path | str = ".") -> Path | None:
    """The nearest ``tapes.toml`` in ``start`` or a parent folder, up to the repository root.

    Like pytest's ini files: the search stops at the first folder holding ``.git``. A file
    another user owns (say ``/tmp/tapes.toml``, planted in a shared folder) is passed over
    with a warning: it could turn a replay's tool live or name a registry to import.
    """
    return _search(resolved(Path(start)))


def find_tape_config(tape: Path | str) -> Path | None:
    """The ``tapes.toml`` that governs a tape opened without ``config=``, or None (see :func:`find_config`)."""
    return _search(resolved(Path(tape)).parent)


def _search(here: Path) -> Path | None:
    for d in (here, *here.parents):
        cand = d / CONFIG_NAME
        owner = _owner(cand)  # whatever it is: one that is no plain file is refused by name (load_config), never
        if owner is not None:  # passed over (its [redact] keys would not apply, its rules not judge)
            if owner in (os.getuid(), 0):
                return cand
            warnings.warn(f"{cand}: ignored, it belongs to another user (uid {owner})", stacklevel=4)
        if (d / ".git").exists():
            break
    return None


def _owner(cand: Path) -> int | None:
    """Who owns ``cand``: the first owner other than this user or root along its chain of symlinks (a link planted to
    a root-owned file, or a hop of the chain), else whoever owns where it ends; None when nothing is there."""
    path, owner = str(cand), None
    for _ in range(_LINK_HOPS):
        try:
            st = os.lstat(path)
        except OSError:  # the chain leads nowhere: its last link's owner (load_config says what it is)
            return owner
        owner = st.st_uid
        if owner not in (os.getuid(), 0) or not stat.S_ISLNK(st.st_mode):
            return owner
        try:
            path = os.path.join(os.path.dirname(path), os.readlink(path))
        except OSError:
            return owner
    return owner  # a loop: load_config says so


_LINK_HOPS = 40  # as the kernel follows


def config_for_tape(tape: Path | str) -> Config:
    """The configuration of a tape opened without ``config=`` (see :func:`find_tape_config`), else defaults.

    ``[redact]``, ``[tools]``, ``[diff]`` and the stale policy apply as written. A tape inside the
    file's tapes folder keeps that folder and changelog; a tape elsewhere is its own folder's
    session, as without a ``tapes.toml``, so paths are never taken relative to a folder it is not in.

    Raises:
        ConfigError: the ``tapes.toml`` found is malformed (the message names it).
    """
    found = find_tape_config(tape)
    folder = Config.for_dir(resolved(Path(tape)).parent)
    if found is None:
        return folder
    cfg = load_config(found)
    t = resolved(Path(tape))
    if cfg.tapes_dir in t.parents:
        return cfg
    return replace(cfg, tapes_dir=folder.tapes_dir, changelog=folder.changelog)


def _check_type(value: Any, types: tuple[type, ...], desc: str, where: str) -> None:
    if isinstance(value, bool) and bool not in types:
        raise ConfigError(f"{where} must be {desc}, got {value!r}")
    if not isinstance(value, types):
        raise ConfigError(f"{where} must be {desc}, got {type(value).__name__} {value!r}")


def _inside(root: Path, rel: str, where: str) -> Path:
    try:
        p = inside(root, rel)
    except (ValueError, OSError) as e:  # a NUL byte, a symlink loop
        raise ConfigError(f"{where} = {rel!r} is not a usable path: {e}") from None
    if p is None:
        raise ConfigError(f"{where} = {rel!r} points outside the project folder {root}")
    return p


def load_config(path: Path | str) -> Config:
    """Read and validate a ``tapes.toml``.

    Raises:
        ConfigError: the file cannot be read or parsed, or holds an unknown key or a
            value of the wrong type; the message names the file and the key.
    """
    path = resolved(Path(path))
    try:
        text = read_regular(path, "tapes.toml").decode("utf-8")  # a FIFO named tapes.toml never blocks
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    except TapeError as e:
        raise ConfigError(str(e)) from None
    return config_from_text(text, path)


def config_from_text(text: str, path: Path) -> Config:
    """:func:`load_config` of ``text``, as if read from ``path`` (a change checked before it is written).

    Raises:
        ConfigError: as :func:`load_config`.
    """
    doc = _parsed(text, path)
    root = path.parent
    values = _table_values(doc, path)
    stale = values.get("tapes.stale_policy", "warn")
    registry = values.get("tapes.registry")
    tools = _tool_policies(doc.get("tools", {}), path)
    tapes_dir = _inside(root, values.get("tapes.dir", "tapes"), f"{path}: 'tapes.dir'")
    changelog = _inside(
        root,
        values.get("tapes.changelog", str(Path(values.get("tapes.dir", "tapes")) / "CHANGELOG.md")),
        f"{path}: 'tapes.changelog'",
    )
    if tapes_dir in changelog.parents and changelog.name.endswith(".jsonl"):
        rel = changelog.relative_to(tapes_dir)
        if not any(part.startswith(".") for part in rel.parts):  # every other .jsonl there is a tape
            raise ConfigError(
                f"{path}: 'tapes.changelog' = {str(rel)!r} is a .jsonl file in the tapes folder, which would be read "
                "as a tape (and an import or a recording of that name would replace it): name it .md, or put it "
                "outside the tapes folder"
            )
    command_timeout = _command_timeout(values.get("tapes.command_timeout"), path)
    models = _model_policies(doc.get("models", {}), path)
    compare, sessions = compare_settings(doc.get("compare", {}), str(path))
    return Config(
        root=root,
        tapes_dir=tapes_dir,
        changelog=changelog,
        path=path,
        registry=registry,
        replay_command=values.get("tapes.replay_command"),
        record_command=values.get("tapes.record_command"),
        command_timeout=command_timeout,
        stale_policy=stale,
        ignore=tuple(values.get("diff.ignore", ())),
        volatile_defaults=values.get("diff.volatile_defaults", True),
        redact_keys=tuple(values.get("redact.keys", ())),
        redact_patterns=tuple(values.get("redact.patterns", ())),
        tools=tools,
        fingerprint_ignored=tuple(values.get("fingerprint.ignore", ())),
        compare=compare,
        compare_sessions=sessions,
        models=models,
        otel_enabled=values.get("otel.enabled", False),
    )


def _parsed(text: str, path: Path) -> dict[str, Any]:
    """The TOML document of ``text``, each of its top-level keys a known table.

    Raises:
        ConfigError: not TOML (naming the line), an unknown table, or a table's key holding a plain value.
    """
    try:
        doc: dict[str, Any] = tomlkit.parse(text).unwrap()
    except ParseError as e:
        raise ConfigError(f"{path}:{e.line}: {e}") from None
    known_tables = set(_TABLES)
    for table, body in doc.items():
        if table not in known_tables:
            raise ConfigError(f"{path}: unknown key {table!r} (known: {', '.join(sorted(known_tables))})")
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: {table!r} must be a table")
    return doc


def _table_values(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """The keys of the ``[tapes]``, ``[diff]``, ``[redact]`` and ``[fingerprint]`` tables as ``"table.key"``,
    each of its type and checked: the stale policy, the redaction patterns, the field patterns, the registry.

    Raises:
        ConfigError: an unknown key or a value of the wrong type, naming the file and the key.
    """
    values: dict[str, Any] = {}
    for table, spec in _SCHEMA.items():
        body = doc.get(table, {})
        for key, value in body.items():
            if key not in spec:
                raise ConfigError(f"{path}: unknown key '{table}.{key}' (known: {', '.join(sorted(spec))})")
            types, desc = spec[key]
            _check_type(value, types, desc, f"{path}: '{table}.{key}'")
            if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{path}: '{table}.{key}' must be {desc} (strings only)")
            values[f"{table}.{key}"] = value
    stale = values.get("tapes.stale_policy", "warn")
    if stale not in STALE_POLICIES:
        raise ConfigError(f"{path}: 'tapes.stale_policy' must be one of {', '.join(STALE_POLICIES)}, got {stale!r}")
    for pat in values.get("redact.patterns", []):
        try:
            re.compile(pat)
        except re.error as e:
            raise ConfigError(f"{path}: 'redact.patterns' has an invalid regular expression {pat!r}: {e}") from None
    _check_field_patterns(values.get("fingerprint.ignore", []), f"{path}: 'fingerprint.ignore'")
    registry = values.get("tapes.registry")
    if registry is not None and not re.fullmatch(r"[\w.]+:[\w.]+", registry):
        raise ConfigError(f"{path}: 'tapes.registry' must look like module:attribute, got {registry!r}")
    return values


def _tool_policies(tools: dict[str, Any], path: Path) -> dict[str, ToolPolicy]:
    """``[tools.NAME]`` tables as each tool's policy (a ttl read as seconds).

    Raises:
        ConfigError: an unknown key or a bad value, naming the file and ``tools.NAME.KEY``.
    """
    out: dict[str, ToolPolicy] = {}
    for name, body in tools.items():
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: 'tools.{name}' must be a table")
        kw: dict[str, Any] = {}
        for key, value in body.items():
            where = f"{path}: 'tools.{name}.{key}'"
            if key not in _TOOL_KEYS:
                raise ConfigError(f"{path}: unknown key 'tools.{name}.{key}' (known: {', '.join(sorted(_TOOL_KEYS))})")
            _check_type(value, *_TOOL_KEYS[key], where)
            if key == "ttl":
                value = parse_duration(value, where)
            if key == "stale_policy" and value not in STALE_POLICIES:
                raise ConfigError(f"{where} must be one of {', '.join(STALE_POLICIES)}, got {value!r}")
            if key == "fingerprint_ignore":
                _check_field_patterns(value, where)
                value = tuple(value)
            kw[key] = value
        out[name] = ToolPolicy(**kw)
    return out


def _model_policies(models: dict[str, Any], path: Path) -> dict[str, ModelPolicy]:
    """``[models."NAME"]`` tables: ``price = { input = 2.5, output = 10.0 }`` (dollars per million tokens) and
    ``live``.

    Raises:
        ConfigError: an unknown key or a bad value, naming the file and ``models."NAME".KEY``.
    """
    out: dict[str, ModelPolicy] = {}
    for name, body in models.items():
        where = f'{path}: \'models."{name}"'
        if not isinstance(body, dict):
            raise ConfigError(f"{where}' must be a table")
        kw: dict[str, Any] = {}
        for key, value in body.items():
            if key == "live":
                if type(value) is not bool:
                    raise ConfigError(f"{where}.live' must be true or false")
                kw["live"] = value
            elif key == "price":
                if not isinstance(value, dict) or not value or set(value) - {"input", "output"}:
                    raise ConfigError(
                        f"{where}.price' must be a table {{ input = ..., output = ... }} (dollars per million tokens)"
                    )
                for side, v in value.items():
                    if type(v) not in (int, float) or not 0 <= v < 1e9 or v != v:
                        raise ConfigError(f"{where}.price.{side}' must be a price of at least 0, got {v!r}")
                    kw[f"{side}_price"] = float(v)
            else:
                raise ConfigError(f"{path}: unknown key 'models.\"{name}\".{key}' (known: live, price)")
        out[name] = ModelPolicy(**kw)
    return out


def _command_timeout(timeout: Any, path: Path) -> float:
    """``[tapes] command_timeout`` in seconds (1800 when not set).

    Raises:
        ConfigError: not a duration, or more than :data:`MAX_COMMAND_TIMEOUT`.
    """
    where = f"{path}: 'tapes.command_timeout'"
    command_timeout = 1800.0 if timeout is None else parse_duration(timeout, where, what="a command_timeout")
    if command_timeout > MAX_COMMAND_TIMEOUT:
        raise ConfigError(f"{where} must be at most 7 days, got {_shown(timeout)}")
    return command_timeout


def _check_field_patterns(patterns: list[Any], where: str) -> None:
    """Manifest field patterns (``title``, ``schema.properties.*.title``, ``*.title``) whose first segment
    names a field of a manifest, or is a wildcard: a typo is an error, not a silently ignored nothing.

    Raises:
        ConfigError: naming ``where`` (the file and key) and the pattern.
    """
    for pat in patterns:
        if not isinstance(pat, str):
            raise ConfigError(f"{where} must be a list of manifest field patterns (strings only)")
        segs = [s for s in re.split(r"\.|\[|\]", pat) if s]
        if not segs:
            raise ConfigError(f"{where} has an empty pattern {pat!r}")
        if segs[0] != "**" and not any(fnmatch.fnmatchcase(f, segs[0]) for f in MANIFEST_FIELDS):
            raise ConfigError(
                f"{where} has {pat!r}, which names no field of a tool manifest "
                f"(fields: {', '.join(MANIFEST_FIELDS)}; wildcards as in [diff] ignore)"
            )
