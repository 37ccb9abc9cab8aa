"""The app as the snapshot tests see it: the tapes.toml of the current folder, no watcher."""

from pathlib import Path

from tapetui import load_config
from tapetui.tui.app import TapeApp

app = TapeApp(load_config(Path.cwd() / "tapes.toml"), watch=False)

if __name__ == "__main__":
    app.run()
