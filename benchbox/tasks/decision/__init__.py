"""The built-in decision task."""
