"""GAIA2 on Meta's Agents Research Environments (ARE).

ARE pins its whole dependency stack, so it runs in its own managed virtual environment
(:mod:`.venv`, created on first use) and process (:mod:`.server`), driven over JSON lines by
:mod:`.client`. :class:`Gaia2Env` is one scenario; :class:`Gaia2Benchmark` loads scenarios.
"""

from .benchmark import Gaia2Benchmark
from .env import Gaia2Env

__all__ = ["Gaia2Benchmark", "Gaia2Env"]
