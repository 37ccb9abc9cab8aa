"""What the app's helpers (the review controller, the hook permissions) need of the app: one protocol, so that
each helper is tested against a small fake and none imports the app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.notifications import SeverityLevel

__all__ = ["WorkerHost"]


class WorkerHost(Protocol):
    """Run work in a thread, hand its result back to the main thread, and tell the person."""

    def run_worker(
        self,
        work: Callable[[], None],
        *,
        name: str | None = ...,
        group: str = ...,
        description: str = ...,
        exclusive: bool = ...,
        thread: bool = ...,
    ) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def notify(
        self,
        message: str,
        *,
        title: str = ...,
        severity: SeverityLevel = ...,
        timeout: float | None = ...,
        markup: bool = ...,
    ) -> None: ...

    def show_error(self, e: BaseException) -> None: ...
