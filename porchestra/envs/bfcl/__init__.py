"""BFCL v4 multi-turn (base, miss_func, miss_param, long_context) with BFCL's own checker."""

from .benchmark import BFCLBenchmark
from .env import BFCLEnv

__all__ = ["BFCLBenchmark", "BFCLEnv"]
