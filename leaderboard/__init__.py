"""Leaderboard app: task pages and, later, aggregated published results."""
