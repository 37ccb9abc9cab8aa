"""Loaded before any other plugin (``-p tests.bytecode``, first in the project's addopts).

pytest rewrites the asserts of every plugin package it loads (hypothesis, anyio, syrupy, tapetui's own: some 200
modules, over a second of each pytest process: the controller, each xdist worker, each inner pytest a test runs)
and keeps the result beside each module, unless ``PYTHONDONTWRITEBYTECODE`` is set (as on these CI machines): then
every start rewrites them all again. From here until collection ends (:func:`tests.conftest.pytest_collection`)
compiled modules are kept whatever the setting; the tests then run with the setting as the run was started with.
"""

from __future__ import annotations

import sys

DONT_WRITE_BYTECODE = sys.dont_write_bytecode  # as the run was started with
sys.dont_write_bytecode = False
