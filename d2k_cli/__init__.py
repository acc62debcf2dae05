"""``d2k``: the team command line client of the D2K-Bench portal (REST API, no Django needed)."""
