"""oncelog.protocol: sans-IO Kafka wire codecs (headers, message bodies, error codes, API keys)."""

from oncelog.protocol.api import APIS, DECLARED_VERSIONS, SCHEMAS, SUPPORTED_VERSIONS, Api, ApiKey
from oncelog.protocol.codec import (
    api_versions_v0_error_body,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from oncelog.protocol.errors import (
    DecodeError,
    EncodeError,
    ErrorCode,
    ProtocolError,
    UnsupportedVersionError,
)
from oncelog.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    request_header_version,
    response_header_version,
)

__all__ = [
    "APIS",
    "DECLARED_VERSIONS",
    "SCHEMAS",
    "SUPPORTED_VERSIONS",
    "Api",
    "ApiKey",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "ProtocolError",
    "RequestHeader",
    "UnsupportedVersionError",
    "api_versions_v0_error_body",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "decode_response_header",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "request_header_version",
    "response_header_version",
]
