"""Submissions: bundles, validation, the state machine, evaluation attempts and their results."""
