"""SASL authentication on SASL_PLAINTEXT listeners: settings, mechanism servers, the connection state machine and
the SCRAM credential store."""
