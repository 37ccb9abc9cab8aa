"""The engine: canonical keys, redaction, fingerprints, the tape file format and its index, locks, run logs, and `Tape`.

Nothing here imports `tapetui.review`, the fronts or Textual."""
