#!/usr/bin/env python3
"""Embed the plumbing modules into the notebook's folded cells that name them (edit the module, not the cell).

    python tools/embed_modules.py --check|--fix [NOTEBOOK ...]   # exit 1 naming stale cells | rewrite them

A cell's second line `# Source: plumbing/a.py, requirements.txt as B (embedded by tools/embed_modules.py)` names
its modules: their text less docstrings and `__future__`/`plumbing` imports; `as B`: the file as the string B, and
the modules' own assignment to B left out. The modules are read from the clone that holds the notebook. No other
cell is touched.
"""

import ast
import re
import sys
from pathlib import Path

import safe_io
from notebook_format import REPO, TITLE, each_notebook, parse_args, write_notebook

SOURCE_LINE = re.compile(r"^# Source: (?P<spec>.+?) \(embedded by tools/embed_modules\.py\)$")
ITEM = re.compile(r"^(?P<path>plumbing/[a-z_]+\.py|requirements\.txt)(?: as (?P<name>[A-Z][A-Z0-9_]*))?$")


class EmbeddingError(ValueError):
    pass


def embedded_modules(source: str) -> list[tuple[str, str | None]]:
    """[(path, constant name or None)] a folded cell's Source line names; [] for other cells."""
    lines = source.split("\n", 2)
    match = SOURCE_LINE.match(lines[1]) if len(lines) > 1 and TITLE.match(lines[0]) else None
    items = [(item, ITEM.match(item)) for item in match["spec"].split(", ")] if match else []
    for item, parsed in items:
        if parsed is None or (parsed["path"].endswith(".txt") and not parsed["name"]):
            raise EmbeddingError(f"Source {item!r}: write plumbing/<name>.py [as NAME] or requirements.txt as NAME")
    return [(parsed["path"], parsed["name"]) for _, parsed in items]


def module_code(text: str, path: str, constants, imported: set) -> str:
    """The module's lines less docstrings, those imports, the imports an earlier module of the cell made (`imported`,
    which grows) and assignments to `constants` (and blank lines after); EmbeddingError naming a syntax error."""
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        raise EmbeddingError(f"{path} line {error.lineno}: {error.msg}; fix the module, then embed again") from None
    dropped = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").split(".")[0] in ("__future__", "plumbing")
        or isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id in constants for target in node.targets)
    ]
    for node in tree.body:  # an import an earlier module of the cell made is made once
        if isinstance(node, ast.Import | ast.ImportFrom) and node not in dropped:
            dropped += [node] if ast.unparse(node) in imported else []
            imported.add(ast.unparse(node))
    for node in ast.walk(tree):
        body = node.body if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else []
        if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            dropped += [body[0]] if isinstance(body[0].value.value, str) else []
    drop = {number for node in dropped for number in range(node.lineno, node.end_lineno + 1)}
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        drop |= {number} if number - 1 in drop and not line.strip() else set()
    kept = [line for number, line in enumerate(lines, start=1) if number not in drop]
    imports = [index for index, line in enumerate(kept) if line.startswith(("import ", "from "))]
    if imports and kept[imports[-1] + 1 :][:1] != [""]:  # a blank line after the imports, as ruff wants
        kept.insert(imports[-1] + 1, "")
    return "\n".join(kept).strip("\n")


def generated_source(source: str, repo: Path = REPO) -> str | None:
    """Title, Source line and modules that an embedding cell must hold; None for other cells."""
    modules = embedded_modules(source)
    constants, imported = {name for _, name in modules if name}, set()
    parts = []
    for path, name in modules:
        if not (repo / path).is_file():
            raise EmbeddingError(f"{path} does not exist in {repo} (named in the cell {source.splitlines()[0]!r})")
        text = safe_io.read_text(repo / path, what=path)
        python = path.endswith(".py")
        code = module_code(text, path, () if name else constants, imported) if python else text.strip("\n")
        if name and ('"""' in code or code.endswith("\\")):
            raise EmbeddingError(f"{path} cannot be embedded as {name}: it holds a triple quote or ends with \\")
        parts.append(f'{name} = r"""\n{code}\n"""' if name else code)
    return "\n".join(source.split("\n", 2)[:2]) + "\n" + "\n\n\n".join(parts) if parts else None


def clone_of(notebook_path: Path) -> Path:
    """The clone a notebook is in (its folder, holding plumbing/): never this script's clone for another's notebook."""
    folder = notebook_path.resolve().parent
    if not (folder / "plumbing").is_dir():
        raise EmbeddingError(
            f"{folder} holds no plumbing/, so the modules the cells name are not beside the notebook: "
            "put the notebook at the top of its clone, then embed"
        )
    return folder


def stale_cells(notebook: dict, repo: Path = REPO) -> dict[int, str]:
    """{cell index: what it must hold} for each embedding cell that differs from its modules."""
    code = {i: "".join(cell["source"]) for i, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "code"}
    made = {index: generated_source(source, repo) for index, source in code.items()}
    return {index: expected for index, expected in made.items() if expected not in (None, code[index])}


def embed(path: Path, notebook: dict, fix: bool) -> int:
    stale = stale_cells(notebook, clone_of(path))
    for index, cell in enumerate(notebook["cells"]):
        if index in stale:
            modules = ", ".join(module for module, _ in embedded_modules(stale[index]))
            said = "embedded anew from" if fix else "differs from"
            print(f"{path}: cell {index} ({cell.get('id')}) {said} {modules}")
        cell["source"] = stale.get(index, "".join(cell["source"]))
    if stale and fix:
        write_notebook(path, notebook)
    elif stale:
        print(f"Embed them with: python {safe_io.quoted(Path(__file__).resolve())} --fix {safe_io.quoted(path)}")
    return 1 if stale and not fix else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__, "name the cells that differ from their modules (exit 1)", "rewrite them")
    return each_notebook(args, embed, errors=(EmbeddingError,))


if __name__ == "__main__":
    sys.exit(main())
