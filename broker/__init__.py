"""oncelog.broker."""
