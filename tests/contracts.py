"""Import contracts that import-linter's own types cannot state (``[tool.importlinter]
contract_types`` names them; ``lint-imports`` imports this module from the repository root).

``private_names``: the modules of ``source_package`` (the CLI) use only what other packages
make public. They may not import a name that starts with ``_`` from a module outside the
package (``from policy.usage import _plus``), nor import a module whose last part starts with
``_`` (``import controller._wiring``); dunder names (``__future__``, ``__version__``) are public.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@cache
def _from_imports(module: str) -> dict[int, tuple[str, ...]]:
    """Line number -> the names a ``from ... import`` statement there imports (all of them, even
    when the statement runs over several lines, which import-linter shows only the first of)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return {}
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read(), spec.origin)
    return {node.lineno: tuple(alias.name for alias in node.names)
            for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


class PrivateNamesContract(Contract):
    """Modules of ``source_package`` import no private name of a module outside it."""

    source_package = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        package = str(self.source_package)
        inside = {package, *graph.find_descendants(package)}
        broken = []
        for importer in sorted(inside):
            for imported in sorted(graph.find_modules_directly_imported_by(importer) - inside):
                names = _from_imports(importer)
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    line = int(detail["line_number"])
                    private = [n for n in names.get(line, ()) if _private(n)]
                    if _private(imported.rsplit(".", 1)[-1]):
                        private.append(imported)
                    if private:
                        broken.append({"importer": importer, "imported": imported, "line_number": line,
                                       "line_contents": detail["line_contents"], "names": private})
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for b in check.metadata["broken"]:
            output.print_error(
                f"{b['importer']} imports {', '.join(b['names'])}, private to {b['imported']} "
                f"(l.{b['line_number']}: {b['line_contents']})", bold=False)
            output.new_line()
