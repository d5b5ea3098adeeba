"""dcbench: the dontcache benchmark suite (control plane; the I/O is dcload's)."""

__version__ = "0.1.0"

# Version of the results layout (manifest.json, summary.json, SQLite schema).
# Readers refuse results of a newer format instead of misreading them.
RESULTS_FORMAT = 1
