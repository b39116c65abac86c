"""Domain models without I/O: tool registry, workflows, tasks, traces."""
