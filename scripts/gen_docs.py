"""Write the generated tables of docs/ from the operation registry (maintenance/operations/):
each between `<!-- generated: NAME -->` and `<!-- end: NAME -->`; `--check` fails if any is
stale. The prose around them is hand-written."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from deltakeeper.maintenance.operations import Cadence
from deltakeeper.maintenance.operations.registry import REGISTRY

REPO = Path(__file__).resolve().parent.parent


def _operations() -> str:
    """Every operation: what it does, when a daemon plans it, what it deletes, whether Spark
    can run it, and what it may do on a catalog-managed table."""
    rows = [
        "| operation | what it does | when a daemon plans it | deletes | on Spark | "
        "catalog-managed table |",
        "|---|---|---|---|---|---|",
    ]
    for op, spec in REGISTRY.items():
        deletes = f"{spec.deletes} files" if spec.deletes else ""
        key = spec.engine_key.rsplit(".", 1)[-1] or "engine"
        spark = f"with `{key}: spark`" if spec.engine is not None else ""
        if spec.cadence is Cadence.JOBS:
            spark = "always: a Spark job"
        rows.append(
            f"| `{op}` | {spec.summary} | {spec.cadence.value} | {deletes} | {spark} "
            f"| {spec.catalog.value} |"
        )
    return "\n".join(rows)


TABLES: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/maintenance.md", "operations"): _operations,
}


def render() -> dict[Path, str]:
    """Every file with a generated table -> its text with the tables current."""
    out: dict[Path, str] = {}
    for (name, table), make in TABLES.items():
        path = REPO / name
        text = out.get(path) or path.read_text()
        block = re.compile(
            rf"(<!-- generated: {table} -->\n)(?:.*?\n)?(<!-- end: {table} -->)", re.DOTALL
        )
        if not block.search(text):
            raise SystemExit(f"{name} has no `<!-- generated: {table} -->` block")
        made = make().replace("\\", "\\\\")  # a template: its backslashes are literal
        out[path] = block.sub(rf"\g<1>{made}\n\g<2>", text)
    return out


def main(argv: list[str]) -> int:
    stale = []
    for path, text in render().items():
        if path.read_text() == text:
            continue
        if "--check" in argv:
            stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}; run scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
