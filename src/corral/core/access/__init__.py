"""Who may come in and what they may bring: callers, scopes, tokens, sessions, rate limits, hostile bodies."""
