"""The review workflow over tapes: compare, check, the crash journal and recover, accept/reject/expire/undo, re-record, scrub."""
