"""The registry of live tools: callables with a schema, a pinned version and a fingerprint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tapetui.errors import TapeError
from tapetui.fingerprint import ToolManifest, tool_manifest

__all__ = ["Tool", "ToolRegistry"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Tool:
    """A registered tool. The manifest (and so the fingerprint) is computed once, at registration."""

    name: str
    fn: Callable[..., Any]
    schema: dict[str, Any]
    version: str
    side_effect: bool
    ttl: float | None
    manifest: ToolManifest

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    def __call__(self, args: dict[str, Any]) -> Any:
        return self.fn(**args)


class ToolRegistry:
    """Tools an agent may call, by name."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(
        self,
        fn: Callable[..., Any],
        *,
        schema: dict[str, Any] | None = None,
        version: str = "0",
        side_effect: bool = False,
        name: str | None = None,
        ttl: float | None = None,
    ) -> Tool:
        """Register ``fn`` as a tool.

        Args:
            fn: the callable; it is called with the arguments as keywords.
            schema: the JSON schema the model sees for its arguments.
            version: the pinned version of the tool's contract.
            side_effect: whether calling it changes the world (it never runs in ``replay``).
            name: the tool name; the function's name by default.
            ttl: seconds a recorded result stays fresh (declares the tool time-sensitive).

        Raises:
            TapeError: a tool of that name is already registered.
        """
        schema = schema if schema is not None else {}
        tool_name = name or fn.__name__
        if tool_name in self._tools:
            raise TapeError(f"tool {tool_name!r} is already registered")
        if ttl is not None and ttl <= 0:
            raise TapeError(f"tool {tool_name!r}: ttl must be positive, got {ttl!r}")
        tool = Tool(tool_name, fn, schema, str(version), bool(side_effect), ttl,
                    tool_manifest(fn, schema, str(version), tool_name))
        self._tools[tool_name] = tool
        return tool

    def tool(self, *, schema: dict[str, Any] | None = None, version: str = "0", side_effect: bool = False,
             name: str | None = None, ttl: float | None = None) -> Callable[[F], F]:
        """Decorator form of :meth:`register`; returns the function unchanged."""

        def deco(fn: F) -> F:
            self.register(fn, schema=schema, version=version, side_effect=side_effect, name=name, ttl=ttl)
            return fn

        return deco

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise TapeError(f"no tool {name!r} in the registry (registered: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
