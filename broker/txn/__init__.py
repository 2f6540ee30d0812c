"""Transaction coordinator: state machine, __transaction_state log, markers."""
