"""The trace format, standard library only: mounted into sandboxes."""
