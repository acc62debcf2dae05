"""Settings split by environment: ``base`` plus ``dev``, ``test`` and ``prod`` overrides.

Every difference between deployments comes from environment variables read in ``base``; the
per-environment modules only change defaults and refuse unsafe combinations.
"""
