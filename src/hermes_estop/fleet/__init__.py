"""The fleet: every fleet-wide operation (the Fleet object, the deadman, leases, the consumer registry and
acknowledgements, the audit trail)."""
