"""τ²-bench (telecom solo; retail/airline/telecom with an LLM user simulator) over inspect-evals' port."""

from .benchmark import Tau2Benchmark
from .env import Tau2Env

__all__ = ["Tau2Benchmark", "Tau2Env"]
