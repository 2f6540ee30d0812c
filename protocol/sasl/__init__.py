"""SASL mechanisms' message formats and computations (sans-IO): PLAIN (RFC 4616) and SCRAM (RFC 5802/7677)."""
