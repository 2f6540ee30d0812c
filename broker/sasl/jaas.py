"""Kafka's ``sasl.jaas.config`` syntax: ``<LoginModuleClass> <flag> [key=value ...];``.

As Kafka's JaasConfig parses it: exactly one login module; the flag is required, requisite, sufficient or optional
(any case); a value is a double-quoted string (backslash escapes the next character) or a bare word; the entry ends
with ``;``. Option values are secrets (PLAIN passwords): never logged, never in error messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from oncelog.broker.config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<punct>[=;])|(?P<word>[^\s=;"]+))', re.DOTALL)


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # option values may be passwords
        return f"JaasEntry({self.login_module!r}, {self.flag!r}, options={sorted(self.options)})"


def _tokens(text: str, property_name: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConfigError(f"{property_name}: unterminated quoted value in JAAS configuration")
        position = match.end()
        if match["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1], flags=re.DOTALL)))
        elif match["punct"] is not None:
            tokens.append((match["punct"], match["punct"]))
        else:
            tokens.append(("word", match["word"]))
    return tokens


def parse_jaas_config(text: str, property_name: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of ``text``; ConfigError (naming the property, never a value) when malformed."""
    tokens = _tokens(text, property_name)
    entries: list[JaasEntry] = []
    index = 0
    while index < len(tokens):
        if len(tokens) - index < 2 or tokens[index][0] != "word" or tokens[index + 1][0] != "word":
            raise ConfigError(f"{property_name}: expected '<LoginModule> <flag> ...;' in JAAS configuration")
        module, flag = tokens[index][1], tokens[index + 1][1].lower()
        if flag not in _FLAGS:
            raise ConfigError(f"{property_name}: invalid control flag {tokens[index + 1][1]!r} for {module}")
        index += 2
        options: dict[str, str] = {}
        while index < len(tokens) and tokens[index][0] != ";":
            if (
                index + 2 >= len(tokens)
                or tokens[index][0] != "word"
                or tokens[index + 1][0] != "="
                or tokens[index + 2][0] not in ("word", "value")
            ):
                raise ConfigError(f"{property_name}: expected key=value options in JAAS configuration of {module}")
            options[tokens[index][1]] = tokens[index + 2][1]
            index += 3
        if index >= len(tokens):
            raise ConfigError(f"{property_name}: JAAS configuration of {module} must end with ';'")
        index += 1
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise ConfigError(
            f"{property_name}: JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
