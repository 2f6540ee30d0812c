"""A SASL listener's settings, resolved and checked at start-up.

Mechanisms: ``listener.name.<listener>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``. Kafka's default
is GSSAPI (Kerberos), which this broker does not implement: a SASL listener whose mechanisms include GSSAPI,
OAUTHBEARER or any other unsupported name refuses to start, saying what to set.

PLAIN's users come from ``listener.name.<listener>.plain.sasl.jaas.config`` (PlainLoginModule with ``user_<name>=
"<password>"`` options, as Kafka's PlainServerCallbackHandler reads them); that property is required when PLAIN is
enabled. SCRAM's users are the broker's SCRAM credentials (``ScramCredentialStore``); a
``<scram-mechanism>.sasl.jaas.config``, if set, must name ScramLoginModule and carries nothing the server needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oncelog.broker.config import BrokerConfig, ConfigError, list_items
from oncelog.broker.listeners import Listener
from oncelog.broker.sasl.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, parse_jaas_config
from oncelog.protocol.sasl.scram import MECHANISMS as SCRAM_MECHANISMS

PLAIN = "PLAIN"
#: The mechanisms this broker implements.
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
#: Kafka's PlainLoginModule option prefix for a user's password.
PLAIN_USER_PREFIX = "user_"


@dataclass(frozen=True)
class SaslListenerConfig:
    """The mechanisms one listener enables, in the configured order, and PLAIN's passwords."""

    mechanisms: tuple[str, ...]
    plain_passwords: dict[str, str] = field(default_factory=dict, repr=False)


def sasl_listener_config(config: BrokerConfig, listener: Listener) -> SaslListenerConfig:
    prefix = listener.config_prefix
    mechanisms_name = prefix + "sasl.enabled.mechanisms"
    text = config.get_optional(mechanisms_name)
    if text is None:
        mechanisms_name, text = "sasl.enabled.mechanisms", config.get_str("sasl.enabled.mechanisms")
    mechanisms = tuple(dict.fromkeys(item.upper() for item in list_items(text)))
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(
            f"listener {listener.name}: {mechanisms_name}={text} names "
            f"{'unsupported mechanism(s) ' + ', '.join(unsupported) if unsupported else 'no mechanism'}; "
            f"set it to one or more of {', '.join(SUPPORTED_MECHANISMS)}"
        )
    passwords: dict[str, str] = {}
    for mechanism in mechanisms:
        jaas_name = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        jaas_text = config.get_optional(jaas_name)
        if jaas_text is None:
            if mechanism == PLAIN:
                raise ConfigError(
                    f"listener {listener.name}: PLAIN is enabled but {jaas_name} is not set "
                    f'(e.g. {PLAIN_LOGIN_MODULE} required user_alice="alice-secret";)'
                )
            continue
        entry = parse_jaas_config(jaas_text, jaas_name)
        expected = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
        if entry.login_module != expected:
            raise ConfigError(
                f"{jaas_name}: login module {entry.login_module} does not serve {mechanism} (expected {expected})"
            )
        if mechanism == PLAIN:
            passwords = {
                key[len(PLAIN_USER_PREFIX) :]: value
                for key, value in entry.options.items()
                if key.startswith(PLAIN_USER_PREFIX)
            }
    return SaslListenerConfig(mechanisms, passwords)
