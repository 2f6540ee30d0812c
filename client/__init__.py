"""oncelog.client."""
