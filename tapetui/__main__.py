from tapetui.cli import run

run()
