"""Use cases that compose the core and the adapters."""
