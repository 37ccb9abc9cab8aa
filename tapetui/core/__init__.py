"""The engine: what a tape is, how it is recorded and replayed. Nothing here imports `tapetui.review`, the
fronts or Textual.

One noun per module, lowest first (each imports only those above it in this list):

- ``textsafe``, ``changes`` (a difference at a JSON path, as text), ``errors``, ``clock``, ``cachedir``
- ``canon`` (canonical form), ``redact``, ``keys`` (call keys), ``jsondiff`` (finding differences)
- ``files`` (regular files, atomic writes), ``store`` (the tapes folder: names, "stays inside the root")
- ``codecs`` (typed values as JSON and back), ``fingerprint``, ``config`` (``tapes.toml``), ``registry``,
  ``recorded_errors`` (result-or-error)
- ``index`` (the index of a tape and its line parser), ``indexcache``, ``tapefile`` (the format: reading,
  appending), ``locks``, ``runlog`` (run-log events, one typed vocabulary)
- ``contract`` (fingerprint checks), ``live`` (running a tool live and writing its line), ``fill``,
  ``matching`` (which recording a replayed call is, for sequential and parallel calls)
- ``tape`` (``Tape``)
"""
