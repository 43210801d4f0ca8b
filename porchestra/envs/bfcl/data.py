"""BFCL v4 multi-turn data and backends, read from the installed `bfcl-eval` package at run time.

`bfcl-eval` is installed with --no-deps (its full dependency list pins numpy 1.26 and pulls model
SDKs); only its data files, its stateful Python backends and its multi-turn checker are used here.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from functools import lru_cache
from importlib import resources
from typing import Any

from ..benchmark import BenchmarkError

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")


def _data() -> Any:
    try:
        return resources.files("bfcl_eval") / "data"
    except ModuleNotFoundError:
        raise BenchmarkError("BFCL needs bfcl-eval (pip install --no-deps bfcl-eval mpmath)") from None


def _jsonl(path: Any) -> list[dict[str, Any]]:
    if not path.is_file():
        raise BenchmarkError(f"BFCL data file not found: {path}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@lru_cache(maxsize=8)
def _category(category: str) -> tuple[tuple[dict[str, Any], list[list[str]]], ...]:
    if category not in CATEGORIES:
        raise BenchmarkError(f"option category={category!r}: choose one of {', '.join(CATEGORIES)}")
    name = f"BFCL_v4_multi_turn_{category}.json"
    entries = _jsonl(_data() / name)
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(_data() / "possible_answer" / name)}
    missing = [e["id"] for e in entries if e["id"] not in answers]
    if missing:
        raise BenchmarkError(f"{name}: no possible answer for {missing[:3]}")
    return tuple((e, answers[e["id"]]) for e in entries)


def load_entries(category: str) -> list[tuple[dict[str, Any], list[list[str]]]]:
    """(entry, per-turn ground-truth call strings), deep copies so callers may mutate them."""
    return copy.deepcopy(list(_category(category)))


@lru_cache(maxsize=16)
def func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(_jsonl(_data() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


def to_json_schema(schema: Any) -> Any:
    """BFCL's Gorilla types ("dict", "float", "tuple", ...) → JSON schema, with BFCL's own mapping."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = GORILLA_TO_OPENAPI.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out


def make_instances(entry: dict[str, Any], long_context: bool) -> dict[str, Any]:
    """Fresh backend objects for the entry's involved classes, loaded from its initial config."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    out = {}
    for class_name in entry["involved_classes"]:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
        obj = cls()
        if class_name not in STATELESS_CLASSES:
            obj._load_scenario(copy.deepcopy(entry["initial_config"].get(class_name, {})), long_context=long_context)
        out[class_name] = obj
    return out


def parse_call(text: str, methods: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string such as "sort('report.pdf')" → (name, keyword arguments)."""
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = node.func.id
    args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    if node.args:
        params = [p for p in inspect.signature(methods[name]).parameters if p != "self"]
        args.update({params[i]: ast.literal_eval(a) for i, a in enumerate(node.args)})
    return name, args


def call_string(name: str, args: dict[str, Any]) -> str:
    """The call as BFCL's checker re-executes it (Python literals of the JSON arguments)."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def result_text(value: Any) -> str:
    """Execution result as BFCL's multi-turn executor stringifies it (the response checker compares these)."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)
