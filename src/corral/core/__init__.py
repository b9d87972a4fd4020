"""Pure domain: job spec, states, resources and scheduling policy. No I/O here."""
