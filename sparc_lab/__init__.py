"""Training code: torch is needed here and only here (`pip install sparc-local[train]`)."""
