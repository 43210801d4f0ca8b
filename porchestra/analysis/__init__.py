"""Analyses over event logs (paper RQ3/RQ4): recovery under injected faults, cost splits, task
length / dynamicity groups, success–cost Pareto fronts. Everything is derived from events.jsonl."""
