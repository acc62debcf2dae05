"""Teams, their members and their API tokens."""
