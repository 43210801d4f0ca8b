"""Tools declared from typed Python functions: JSON schema generated, arguments validated.

    @tool
    def read_file(path: str, max_chars: int = 20000) -> str:
        "Read a text file from the workspace."

`Tool.run(args)` validates the arguments against the signature (pydantic) and returns a
:class:`ToolResult`; it never raises for bad arguments or a failing tool body.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError, create_model


class ToolError(Exception):
    """Raised inside a tool body for an expected failure; the message becomes the observation."""


@dataclass
class ToolResult:
    ok: bool
    output: str = ""
    error: str | None = None
    data: Any = None  # the structured result, when the tool has one (checkers may use it)


def _to_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    fn: Callable[..., Any]
    args_model: type[BaseModel] | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"writes": True} for side effects

    def run(self, args: dict[str, Any] | None) -> ToolResult:
        args = args or {}
        if not isinstance(args, dict):
            return ToolResult(False, error=f"arguments of {self.name} must be a JSON object")
        if self.args_model is not None:
            try:
                args = self.args_model.model_validate(args).model_dump(exclude_unset=False)
            except ValidationError as e:
                msg = "; ".join(f"{'.'.join(map(str, er['loc'])) or 'args'}: {er['msg']}" for er in e.errors())
                return ToolResult(False, error=f"invalid arguments for {self.name}: {msg}")
        try:
            value = self.fn(**args)
        except ToolError as e:
            return ToolResult(False, error=str(e))
        except Exception as e:  # a tool body bug must not crash the run
            return ToolResult(False, error=f"{type(e).__name__}: {e}")
        if isinstance(value, ToolResult):
            return value
        return ToolResult(True, output=_to_text(value), data=value)

    def schema(self) -> dict[str, Any]:
        """OpenAI-style function description."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    props = {}
    for k, v in schema.get("properties", {}).items():
        v = dict(v)
        v.pop("title", None)
        props[k] = v
    schema["properties"] = props
    schema["additionalProperties"] = False
    return schema


def tool_from_function(fn: Callable[..., Any], name: str | None = None, description: str | None = None,
                       **meta: Any) -> Tool:
    sig = inspect.signature(fn)
    fields: dict[str, Any] = {}
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation if p.annotation is not inspect.Parameter.empty else Any
        default = p.default if p.default is not inspect.Parameter.empty else ...
        fields[pname] = (ann, default)
    model = create_model(  # type: ignore[call-overload]
        f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid", strict=False), **fields
    )
    doc = inspect.getdoc(fn) or ""
    return Tool(
        name=name or fn.__name__,
        description=description or doc.strip(),
        parameters=_clean_schema(model.model_json_schema()),
        fn=fn,
        args_model=model,
        meta=meta,
    )


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None, **meta: Any) -> Any:
    """Decorator form of :func:`tool_from_function`."""
    if fn is None:
        return lambda f: tool_from_function(f, name=name, **meta)
    return tool_from_function(fn, name=name, **meta)


def render_tools(tools: list[Tool]) -> str:
    """Tool names, descriptions and argument schemas as prompt text."""
    lines = []
    for t in tools:
        lines.append(f"- {t.name}: {t.description}\n  arguments: {json.dumps(t.parameters, ensure_ascii=False)}")
    return "\n".join(lines)
