"""Local (one-device) sort engines behind one interface; see engine.py."""

from .engine import LocalSortEngine, get_engine

__all__ = ["LocalSortEngine", "get_engine"]
