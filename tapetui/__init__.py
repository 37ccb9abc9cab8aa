"""tapetui: record, replay and review the tool calls and model turns of AI agents.

The public API is what this module exports; everything else may move.
"""

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
