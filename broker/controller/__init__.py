"""The cluster controller's decisions, as pure functions over cluster state (no I/O: the caller stores the result)."""
