"""The reliability and security suite: each property as a runner that returns figures.

    python -m porchestra.reliability [--fast]     # runs everything, writes docs/reliability.md

Runners (each returns a :class:`~porchestra.reliability.result.PropertyResult`): malformed model
output, API faults, crash safety and resume, sandbox escapes, secrets, budgets, bad input.
"""
