"""Examples of benchbox tasks (run from the repository root)."""
