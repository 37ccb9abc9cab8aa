"""tapetui: record, replay and review the tool calls of AI agents.

The public API is what this module exports; everything else may move.
"""

from tapetui.canon import call_key, canon
from tapetui.config import Config, ToolPolicy, load_config
from tapetui.errors import ConfigError, TapeDrift, TapeError, TapeMiss, TapeReplayedError, TapeStale, ToolDriftError
from tapetui.fingerprint import ToolManifest, tool_fingerprint, tool_manifest
from tapetui.redact import Redactor
from tapetui.registry import Tool, ToolRegistry
from tapetui.runlog import RunLogWarning
from tapetui.tape import MODES, Tape

__all__ = [
    "Config",
    "ConfigError",
    "MODES",
    "Redactor",
    "RunLogWarning",
    "Tape",
    "TapeDrift",
    "TapeError",
    "TapeMiss",
    "TapeReplayedError",
    "TapeStale",
    "Tool",
    "ToolDriftError",
    "ToolManifest",
    "ToolPolicy",
    "ToolRegistry",
    "call_key",
    "canon",
    "load_config",
    "tool_fingerprint",
    "tool_manifest",
]

__version__ = "0.1.0"
