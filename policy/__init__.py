"""Sluicegate's decisions, as pure functions over frozen dataclasses.

Nothing here performs I/O, awaits, logs or talks to Kubernetes: callers gather facts into the
model (``model``), ask for a decision (``admitting``, ``dispatching``, ``placing``) and apply
the answer. An import-linter contract in pyproject.toml keeps it that way.
"""
