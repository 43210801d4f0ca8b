"""YAML reading that cannot be blown up: aliases may not expand past a fixed number of nodes.

`yaml.safe_load` builds shared references for aliases, so a "billion laughs" file of a few hundred
bytes loads in microseconds and then expands to gigabytes in whatever walks it next (pydantic, a JSON
dump of the config into the event log). Here the composed node graph is measured before anything is
constructed: the size it would have with every alias expanded, computed once per node. Beyond
MAX_NODES, or with a recursive alias, or nested too deeply, loading stops with YamlTooLarge.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_NODES = 200_000  # far above any real config or task file, far below a harmful expansion


class YamlTooLarge(ValueError):
    """The document would expand beyond the limits (an alias bomb, a recursive alias, deep nesting)."""


def _expanded_size(root: yaml.Node, limit: int) -> int:
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # iterative post-order: deep nesting cannot exhaust the Python stack
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            total = 1 + sum(sizes[id(k)] for k in kids)
            if total > limit:
                raise YamlTooLarge(f"uses aliases that expand to more than {limit} nodes (an alias bomb?)")
            sizes[key] = total
            open_.discard(key)
            continue
        if key in sizes:
            continue
        if key in open_:
            raise YamlTooLarge("contains a recursive alias (a node that includes itself)")
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class _BoundedLoader(yaml.SafeLoader):
    max_nodes = MAX_NODES

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _expanded_size(node, self.max_nodes)
        return node


def safe_load(text: str, max_nodes: int = MAX_NODES) -> Any:
    """Like yaml.safe_load; YamlTooLarge when the document would expand past `max_nodes` nodes."""
    loader_cls = type("_Loader", (_BoundedLoader,), {"max_nodes": max_nodes})
    loader = loader_cls(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YamlTooLarge("is nested too deeply") from None
    finally:
        loader.dispose()
