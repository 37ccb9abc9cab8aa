"""The engine: what a tape is, how it is recorded and replayed. Nothing here imports `tapetui.review`, the
fronts or Textual (``docs/architecture.md`` has the whole map).

One noun per module, lowest first (each imports only those above it in this list):

- ``textsafe``, ``shown`` (values in a message), ``paths`` (JSON paths: join, split, the first non-JSON
  one), ``changes`` (a difference at a JSON path, as text), ``errors``, ``clock``, ``cachedir``, ``modes``
- ``canon`` (canonical form), ``escapes`` (escapes a secret may hide behind), ``redact``, ``keys`` (call keys),
  ``jsondiff`` (finding differences)
- ``files`` (regular files, atomic writes), ``store`` (the tapes folder: names, "stays inside the root")
- ``jsonform``, ``codectypes``, ``stdcodec``, ``codecs`` (typed values as JSON and back)
- ``declared`` (what a tool declares: ``Contract``, each field's rules), ``manifest_redaction``,
  ``fingerprint``, ``registry``, ``recorded_errors`` (result-or-error)
- ``rulekinds``, ``hookcalls``, ``textsimilarity``, ``judgements``, ``comparators`` (``[compare]`` rules),
  ``config`` (``tapes.toml``)
- ``index`` (the index of a tape and its line parser), ``indexcache``, ``tapefile`` (the format: reading,
  appending), ``locks``, ``runlog`` (run-log events, one typed vocabulary)
- ``contract`` (fingerprint checks), ``live`` (one call run live and its line: ``LiveStep``), ``fill`` (a
  fill's candidate; an earlier fill's calls), ``matching`` (which recording a replayed call is)
- ``session`` (a session's files and locks), ``decide`` (the decision for one request, for any boundary
  kind), ``toolbox`` (the tools one tape knows), ``serving`` (serving a decision at the tool boundary)
- ``tape`` (``Tape``: the facade), ``current`` (``use_tape``)
"""
