"""Test support: broker subprocess, librdkafka mock cluster, free ports, raw wire helpers, datasets.

Modules here import each other relatively so they work both as ``support.*`` (pytest puts ``tests/`` on
``sys.path``) and as ``tests.support.*`` (the benchmark puts the repository root on ``sys.path``).
"""
