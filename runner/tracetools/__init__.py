"""Host-side trace tools: the reader with limits, lint, tasks extract."""
