"""The review workflow over tapes.

Compare, check, the crash journal and recover, accept/reject/expire/undo, re-record, scrub.
"""
