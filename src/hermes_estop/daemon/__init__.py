"""What `hermes serve` assembles and supervises."""
