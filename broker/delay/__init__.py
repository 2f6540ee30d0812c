"""Delayed delivery: the delay-level topics and the DelayService that moves their records to their targets when due.

``route`` decides what to do with one record (pure), ``buffer`` holds one partition's head records in due order,
``service`` is the consume-forward-commit loop (each forward a transaction with the consumed offsets), ``topics``
says which internal topics the broker creates on first use, ``embedded`` runs the service inside a broker.
"""
