"""Moderation: the moderators group, the queue with its evidence, and the decisions."""
