"""An import-linter contract type: no import cycle among the modules of the given packages.

import-linter's own cycle contract (``acyclic_siblings``) works on packages: it squashes each child package with its
descendants, so it reports ``broker.etcd`` <-> ``broker.controller`` when two modules of one import the other
package, even where no module imports itself back. Issue #21 asks for modules: no chain of imports leads from a
module back to itself (TYPE_CHECKING imports included: grimp counts them unless told not to). This contract finds
every strongly connected component of the module graph (Tarjan's algorithm) and names, for each, one cycle with its
import lines. Registered in pyproject.toml ``[tool.importlinter] contract_types``; ``lint-imports`` runs it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import grimp
from importlinter import Contract, ContractCheck, fields, output


class AcyclicModulesContract(Contract):
    """Configuration: ``packages``, the packages whose modules (all descendants) must import each other acyclically;
    imports to and from modules outside them are not followed."""

    type_name = "acyclic_modules"

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots: list[str] = list(self.packages)  # type: ignore[arg-type]
        modules = {m for root in roots for m in ({root} | graph.find_descendants(root))}
        edges = {m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in sorted(modules)}
        cycles = []
        for component in _components(edges):
            if len(component) > 1:
                cycle = _one_cycle(graph, component)
                links = [(a, b, _lines(graph, a, b)) for a, b in itertools.pairwise(cycle)]
                cycles.append((len(component), links))
        return ContractCheck(kept=not cycles, warnings=None, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for size, links in check.metadata["cycles"]:
            output.print_error(f"{size} modules import each other in a cycle; one of its cycles:")
            output.new_line()
            for importer, imported, lines in links:
                output.print_error(f"    {importer} -> {imported} (l.{lines})", bold=False)
            output.new_line()


def _lines(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    """The line numbers of ``importer``'s imports of ``imported``."""
    return ", ".join(str(d["line_number"]) for d in graph.get_import_details(importer=importer, imported=imported))


def _one_cycle(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """A cycle through the component's first module: the shortest chain back to it from a module it imports."""
    members = set(component)
    start = component[0]
    for imported in sorted(graph.find_modules_directly_imported_by(start) & members):
        chain = graph.find_shortest_chain(importer=imported, imported=start)
        if chain is not None and set(chain) <= members:
            return [start, *chain]
    return [*component, start]  # not reached: a component of two or more modules holds a cycle through each


def _components(edges: dict[str, list[str]]) -> Iterator[list[str]]:
    """The strongly connected components of the graph ``edges`` (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                yield sorted(component)
