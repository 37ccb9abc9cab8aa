"""The key footer, fitted to the terminal's width: the review keys stay visible on 80 columns."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

WIDE = 125  # from here on every key is shown with room around it
NARROW = 108  # below this the footer is compact, without the palette hint, and drops the keys below
# q and / are in help (?) and the palette; a, r, R, x, p, F, u stay; J (hooks) is named by the detail pane
NARROW_HIDDEN = frozenset({"quit", "filter", "allow_hooks"})


class ReviewFooter(Footer):
    """A Footer that drops what is least needed on a small terminal instead of cutting keys off the end.

    140 columns: every key, spaced as usual. 100-124: compact. Under 100 (80×24): compact, no
    ``^p palette`` hint, and ``q``/``/`` left to help: ``? n a r R x p F u`` all fit in 80.
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._mode = ""
        self._composed: tuple[Any, ...] | None = None  # the keys as last composed: see bindings_changed

    def _fit(self, width: int) -> str:
        return "wide" if width >= WIDE else "compact" if width >= NARROW else "narrow"

    def on_resize(self, event: events.Resize) -> None:
        mode = self._fit(event.size.width)
        if mode != self._mode:
            self._mode = mode
            self.compact = mode != "wide"
            self.show_command_palette = mode != "narrow"
            self.refresh(recompose=True)

    @staticmethod
    def _keys(screen: Screen[Any]) -> tuple[Any, ...]:
        """What the footer shows of a screen's bindings: each shown key, its action, text and whether it is allowed."""
        return tuple(
            (b.key, b.action, b.description, enabled, tip)
            for _, b, enabled, tip in screen.active_bindings.values()
            if b.show
        )

    def bindings_changed(self, screen: Screen[Any]) -> None:
        """Recompose only when the keys shown would change: Textual says bindings changed at every focus move
        and expand, and recomposing restyles a dozen key widgets each time (a third of opening a 1,000-step
        session)."""
        if self._composed is not None and screen is self.screen and self._keys(screen) == self._composed:
            return
        super().bindings_changed(screen)

    def compose(self):  # type: ignore[no-untyped-def]
        self._composed = self._keys(self.screen) if self._bindings_ready else None
        for widget in super().compose():
            if self._mode == "narrow" and isinstance(widget, FooterKey) and widget.action in NARROW_HIDDEN:
                continue
            yield widget
