"""Named fault points for crash-consistency tests: the broker's view of ``oncelog.storage.faults``.

One registry and one ``ONCELOG_FAULTS`` parser serve both layers (storage may not import the broker); see
``oncelog.storage.faults`` for the points, the actions (``crash``, ``delay``, ``eio``, ``eio-always``) and where each
point is reached. Unset, a fault point costs one truth test of an empty dict.
"""

from __future__ import annotations

from oncelog.storage.faults import ENV_VAR, KNOWN_POINTS, configure, fault_point

__all__ = ["ENV_VAR", "KNOWN_POINTS", "configure", "fault_point"]
