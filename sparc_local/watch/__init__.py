"""The background watcher: events, daemon lifecycle, service units, requests handed to it."""
