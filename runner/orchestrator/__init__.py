"""Host orchestration: load-time checks, the channel, episodes, scheduling and ceilings."""
