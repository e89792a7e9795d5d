"""Shipped model folders (exported_models/ in the repository)."""
