"""Authorized-operation bitfields (KIP-430) as Kafka answers them with no authorizer configured.

oncelog has no authorizer, so a client that asks is told every operation the resource type supports (Kafka's
AclEntry.supportedOperations); one that does not ask gets ``OMITTED``.
"""

from __future__ import annotations

from enum import IntEnum

#: Integer.MIN_VALUE: the client did not ask for authorized operations (the schemas' default).
OMITTED = -(2**31)


class AclOperation(IntEnum):
    """Kafka's AclOperation codes; bit ``code`` of a bitfield stands for the operation."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def bitfield(*operations: AclOperation) -> int:
    """The 32-bit field with each operation's bit set."""
    return sum(1 << op for op in set(operations))


_Op = AclOperation
CLUSTER_OPERATIONS = bitfield(
    _Op.CREATE,
    _Op.CLUSTER_ACTION,
    _Op.DESCRIBE_CONFIGS,
    _Op.ALTER_CONFIGS,
    _Op.IDEMPOTENT_WRITE,
    _Op.ALTER,
    _Op.DESCRIBE,
)
TOPIC_OPERATIONS = bitfield(
    _Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS
)
