"""The tools one tape knows: what a call runs as, its tool line, its codec, and its contract's check.

A :class:`Toolbox` belongs to one :class:`~tapetui.core.tape.Tape` and is used under its lock. It holds the
tool boundary's own knowledge, which the decision machinery (:mod:`tapetui.core.decide`) does not need:

- the tool a live call runs as: the registered one as the tape writes it
  (:func:`~tapetui.core.live.tool_as_written`), else a name-only contract for a call made with ``live=``;
- the tool line written before a tool's first call line in the target (once);
- the codec that rebuilds a recorded result as the tool's return type;
- whether a recording's fingerprint still matches the live contract (:func:`~tapetui.core.contract.contract_change`
  in the form the call was recorded in), remembered per tool once it matched.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapetui.core.codecs import Codec, CodecWarning, codec_for
from tapetui.core.config import Config
from tapetui.core.contract import ContractChange, contract_change
from tapetui.core.errors import TapeError
from tapetui.core.fingerprint import MANIFEST_FIELDS, redact_manifest_line
from tapetui.core.index import TapeIndex
from tapetui.core.live import tool_as_written
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool, ToolRegistry, make_contract
from tapetui.core.tapefile import dump_line

__all__ = ["Toolbox"]

UNKNOWN: Any = object()  # a tool whose codec is not looked up yet


class Toolbox:
    """The tools of one tape (see the module doc).

    Attributes:
        registry: the live tools (None: a replay that checks no fingerprint).
        live: name → the registered tool as this tape writes it.
        unregistered: tools called with ``live=`` that the registry does not hold (name-only contracts).
        written: tools whose tool line the target holds.
        codecs: name → its codec (None: the JSON form), once looked up.
        checked: tool → the recorded fingerprint that matched the live one (no second check).
        checks_off: tools whose contract changed on a tool with ``check_fingerprint = false``.
    """

    def __init__(self, path: Path, registry: ToolRegistry | None, config: Config, redactor: Redactor) -> None:
        self.path = path
        self.registry = registry
        self.config = config
        self.redactor = redactor
        self.live: dict[str, Tool] = {}
        self.unregistered: dict[str, Tool] = {}
        self.written: set[str] = set()
        # tool → the contract fields a trace held of it (an import: tapetui.traces), written on its tool line
        self.traced: dict[str, tuple[str, ...]] = {}
        self.partial_seen: set[str] = set()  # tools compared on a trace's partial contract this run
        self.codecs: dict[str, Codec | None] = {}
        self.checked: dict[str, str] = {}
        self.checks_off: set[str] = set()
        self._codec_warned: set[str] = set()

    def tool(self, name: str, live: Callable[[], Any] | None = None) -> Tool:
        """The tool a live call runs as: the registered one, else (called with ``live=``) a contract that
        holds only its name, so that registering its real contract later shows as contract drift."""
        t = self.live_tool(name)
        if t is not None:
            return t
        if live is not None:
            t = self.unregistered.get(name)
            if t is None:
                t = self.unregistered[name] = tool_as_written(make_contract(name), self.redactor)
            return t
        if self.registry is None:
            raise TapeError(f"{self.path}: tool {name!r} must run live but the tape has no registry (or pass live=)")
        return self.registry[name]  # the registry's error names the tools it has

    def live_tool(self, name: str) -> Tool | None:
        """The registered tool as this tape writes it (:func:`~tapetui.core.live.tool_as_written`), or None."""
        t = self.live.get(name)
        if t is None:
            base = self.registry.get(name) if self.registry is not None else None
            if base is None:
                return None
            t = self.live[name] = tool_as_written(base, self.redactor)
        return t

    def recorded_under(self, name: str) -> str | None:
        """The fingerprint a call of ``name`` records now (None: no registered tool of that name)."""
        live = self.live_tool(name)
        return live.fingerprint if live is not None else None

    def forget(self, name: str) -> None:
        """``name`` was redefined: what was looked up for it is looked up again, its tool line written again."""
        for cache in (self.live, self.checked, self.codecs, self.unregistered):
            cache.pop(name, None)
        self.written.discard(name)

    # ---- tool lines ----------------------------------------------------------------
    def mark_traced(self, name: str, held: tuple[str, ...]) -> None:
        """``name``'s contract is what a trace held of it (``held``: its fields, e.g. name, description and
        schema): its tool line says so (``from_trace``), and replay compares only those fields."""
        self.traced[name] = held

    def tool_line(self, name: str, index: TapeIndex | None = None) -> bytes:
        """The tool line to write before ``name``'s first call line in the target, once (empty after that)."""
        if name in self.written:
            return b""
        line = self.tool_line_bytes(name, index)
        self.written.add(name)
        return line

    def tool_line_bytes(self, name: str, index: TapeIndex | None = None) -> bytes:
        """``name``'s tool line: the live contract's, else the one ``index`` (a golden) holds, redacted."""
        live = self.live_tool(name) or self.unregistered.get(name)
        if live is not None:
            rec = live.manifest.to_record(live.side_effect)
            if name in self.traced:
                rec["from_trace"] = list(self.traced[name])
            return dump_line(rec)
        assert index is not None
        # a tool line copied from an older tape: what it holds verbatim (form 1) is redacted, its fingerprint kept
        return redact_manifest_line(index.manifest_lines.get(name, b""), self.redactor)

    # ---- codecs --------------------------------------------------------------------
    def codec(self, name: str) -> Codec | None:
        try:
            return self.codecs[name]
        except KeyError:
            t = self.registry.get(name) if self.registry is not None else None
            codec = self.codecs[name] = codec_for(t.returns) if t is not None else None
            return codec

    def typed(self, name: str, result: Any) -> Any:
        """A recorded result as the tool's codec rebuilds it (its return type), else as recorded."""
        codec = self.codec(name)
        if codec is None or result is None:
            return result
        try:
            return codec.decode(result)
        except Exception as e:  # noqa: BLE001 - a redacted field, an older tape: the JSON form, said once
            if name not in self._codec_warned:
                self._codec_warned.add(name)
                warnings.warn(
                    f"{self.path}: {name}: the recorded result could not be rebuilt as the tool's return type "
                    f"({type(e).__name__}); returning its JSON form",
                    CodecWarning,
                    stacklevel=5,
                )
            return result

    # ---- contracts -----------------------------------------------------------------
    def fingerprint_change(self, index: TapeIndex, i: int, tool: str) -> ContractChange | None:
        """How live ``tool`` differs from the contract recording ``i`` was made under (None: it does not, or
        there is nothing to compare); a match is remembered for the tool."""
        return self.contract_change_of(index, tool, index.fingerprints[i], index.lines[i])

    def _not_in_trace(self, index: TapeIndex, tool: str) -> tuple[str, ...]:
        """The contract fields a trace did not hold of ``tool`` (its tape was imported): left out of the
        comparison, never drift; the tool is remembered (``partial_seen``) so the run can say so once."""
        held = index.traced.get(tool)
        if held is None:
            return ()
        self.partial_seen.add(tool)
        return tuple(f for f in MANIFEST_FIELDS if f not in held)

    def contract_change_of(self, index: TapeIndex, tool: str, recorded: str, line: int) -> ContractChange | None:
        """How live ``tool`` differs from the contract ``recorded`` (a fingerprint ``index`` holds, on its ``line``: a
        call's, or a model turn's offered tool's); a match is remembered for the tool."""
        live = self.live_tool(tool)
        change = None
        if live is not None and recorded:
            change = contract_change(
                live,
                recorded,
                form=index.fp_forms.get(recorded, 1),
                old=index.manifests.get(tool),
                redactor=self.redactor,
                where=f"{self.path}:{line}",
                ignore=self.config.fingerprint_ignore(tool) + self._not_in_trace(index, tool),
            )
        if change is None:
            self.checked[tool] = recorded  # the same tool and fingerprint again need no check
        return change
