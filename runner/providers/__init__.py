"""Model providers on the host: scripted, replay, deadline, openai, metered."""
