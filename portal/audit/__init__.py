"""The append-only audit log: who changed what, when, from which state to which, and why."""
