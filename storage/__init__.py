"""oncelog.storage."""
