"""The consumer registry and acknowledgements: entries, what a consumer reports, the roster, acks."""
