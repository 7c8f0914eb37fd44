"""Fixtures shared by the integration tests."""

from .cluster import cluster

__all__ = ["cluster"]
