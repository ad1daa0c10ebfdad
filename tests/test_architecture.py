"""The package's shape: no import cycle of any kind (type-only imports included), so every module can be
read, tested and replaced from the bottom up. The layers themselves are ``lint-imports``' (``make lint``)."""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle's members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others_not_even_for_types() -> None:
    graph = grimp.build_graph("streamvoice", exclude_type_checking_imports=False)
    # A package's __init__ re-exporting its modules is not a cycle between concepts.
    for package in [m for m in graph.modules if graph.find_children(m)]:
        for child in graph.find_children(package):
            if graph.direct_import_exists(importer=package, imported=child):
                graph.remove_import(importer=package, imported=child)
    assert _cycles(graph) == []
