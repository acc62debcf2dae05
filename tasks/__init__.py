"""The task catalogue: one folder per task (spec, baseline), plus the loader in ``registry``."""
