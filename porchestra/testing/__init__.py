"""Test helpers other parts may import: a local OpenAI-compatible server with fault injection."""

from .fake_openai import FAULT_KINDS, FakeOpenAIServer, FaultPlan, RecordedRequest

__all__ = ["FAULT_KINDS", "FakeOpenAIServer", "FaultPlan", "RecordedRequest"]
