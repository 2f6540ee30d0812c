"""Which fencing error a request version gets (KIP-588)."""

from oncelog.protocol import ApiKey, ErrorCode

#: The first version of each API that understands PRODUCER_FENCED; older versions get INVALID_PRODUCER_EPOCH.
PRODUCER_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
    ApiKey.TXN_OFFSET_COMMIT: 3,
}


def fencing_error(api_key: ApiKey, version: int) -> ErrorCode:
    """PRODUCER_FENCED for versions that know it, INVALID_PRODUCER_EPOCH before."""
    if version >= PRODUCER_FENCED_SINCE[api_key]:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.INVALID_PRODUCER_EPOCH
