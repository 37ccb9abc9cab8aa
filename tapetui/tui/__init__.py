"""The terminal app, a front over the review layer (it reads no tape bytes itself).

- ``app.py`` composes the screen and binds the keys (``keys.py``);
- ``feed.py`` reads the run logs and watches the tapes folder (threads that post messages);
- ``controller.py`` performs accept, reject, expire, undo, re-record and replay, and keeps the undo stack;
  ``prompts.py`` what the review keys ask before the controller acts;
- ``hooks.py`` which comparison hooks a person allowed (J), the question J asks and the import it does;
- ``detailmodel.py`` what the detail pane shows of a session or a step, read in a worker;
- ``model.py`` the text of a comparison as the detail pane shows it;
- ``messages.py`` app-wide messages; ``widgets/`` one widget per file; ``screens/`` modal screens.

What is known of a session, its steps and the filter come from :mod:`tapetui.review.sessions`.
"""
