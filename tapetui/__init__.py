"""tapetui: record, replay and review the tool calls and model turns of AI agents.

The public API is what this module exports; everything else may move.
Importing ``tapetui`` imports none of them: each is imported on first use (PEP 562), so a command-line run
(``tapetui check``) pays only for what it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tapetui.core.lazy import lazy_names

if TYPE_CHECKING:
    from tapetui.core.canon import canon
    from tapetui.core.codecs import CodecWarning
    from tapetui.core.config import Config, ToolPolicy, load_config
    from tapetui.core.current import current_tape, use_tape
    from tapetui.core.declared import Contract
    from tapetui.core.errors import (
        ConfigError,
        InvalidValue,
        ModelDrift,
        TapeDrift,
        TapeError,
        TapeMiss,
        TapeReplayedError,
        TapeStale,
        TooDeep,
        ToolDriftError,
    )
    from tapetui.core.fingerprint import ToolManifest, tool_fingerprint, tool_manifest
    from tapetui.core.keys import call_key
    from tapetui.core.locks import LockBusy
    from tapetui.core.modelserving import ModelTurn
    from tapetui.core.redact import Redactor
    from tapetui.core.registry import Tool, ToolRegistry
    from tapetui.core.runlog import RunLogWarning
    from tapetui.core.tape import MODES, Mode, Tape

_WHERE: dict[str, str] = {
    "canon": "tapetui.core.canon",
    "CodecWarning": "tapetui.core.codecs",
    "Config": "tapetui.core.config",
    "ToolPolicy": "tapetui.core.config",
    "load_config": "tapetui.core.config",
    "current_tape": "tapetui.core.current",
    "use_tape": "tapetui.core.current",
    "Contract": "tapetui.core.declared",
    "ConfigError": "tapetui.core.errors",
    "InvalidValue": "tapetui.core.errors",
    "ModelDrift": "tapetui.core.errors",
    "TapeDrift": "tapetui.core.errors",
    "TapeError": "tapetui.core.errors",
    "TapeMiss": "tapetui.core.errors",
    "TapeReplayedError": "tapetui.core.errors",
    "TapeStale": "tapetui.core.errors",
    "TooDeep": "tapetui.core.errors",
    "ToolDriftError": "tapetui.core.errors",
    "ToolManifest": "tapetui.core.fingerprint",
    "tool_fingerprint": "tapetui.core.fingerprint",
    "tool_manifest": "tapetui.core.fingerprint",
    "call_key": "tapetui.core.keys",
    "LockBusy": "tapetui.core.locks",
    "ModelTurn": "tapetui.core.modelserving",
    "Redactor": "tapetui.core.redact",
    "Tool": "tapetui.core.registry",
    "ToolRegistry": "tapetui.core.registry",
    "RunLogWarning": "tapetui.core.runlog",
    "MODES": "tapetui.core.tape",
    "Mode": "tapetui.core.tape",
    "Tape": "tapetui.core.tape",
}

__all__ = [
    "CodecWarning",
    "Config",
    "ConfigError",
    "Contract",
    "InvalidValue",
    "LockBusy",
    "MODES",
    "Mode",
    "ModelDrift",
    "ModelTurn",
    "Redactor",
    "RunLogWarning",
    "Tape",
    "TapeDrift",
    "TapeError",
    "TapeMiss",
    "TapeReplayedError",
    "TapeStale",
    "TooDeep",
    "Tool",
    "ToolDriftError",
    "ToolManifest",
    "ToolPolicy",
    "ToolRegistry",
    "call_key",
    "canon",
    "current_tape",
    "load_config",
    "tool_fingerprint",
    "tool_manifest",
    "use_tape",
]

__version__ = "0.2.0"


__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE, __all__)
