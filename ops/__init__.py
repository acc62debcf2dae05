"""Operations helpers that run on worker machines: no Django, no torch at import time."""
