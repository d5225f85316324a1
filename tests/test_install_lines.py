"""Every ``pip install`` line the project shows installs this project, never another one.

On PyPI ``benchbox`` is an unrelated project (database benchmarks with a command of the same name),
so an install line naming it runs the wrong tool. Each line in the README, the docs, the examples
(the CI recipe among them) and the error messages of the package is parsed as pip would read it:
a requirement that is a path must be a checkout of this repository (its ``pyproject.toml`` names
this distribution), a requirement whose name starts with ``benchbox`` must be this distribution's
name, and every extra it asks for must exist in ``pyproject.toml``.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tests.support import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
NAME = PYPROJECT["project"]["name"]
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])
#: pip options that take a value (the value is not a requirement)
VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
                 "-f", "--find-links", "--target", "-t", "--prefix", "--root", "--python", "--platform",
                 "--cache-dir", "--config-settings", "-C", "--upgrade-strategy"}
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)?(?:\[([^\]]*)\])?(.*)$")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def shown_files() -> list[Path]:
    """The files a user reads install lines in."""
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    shown = {".yml", ".yaml", ".sh", ".md", ".py"}
    files += sorted(p for p in (REPO / "examples").rglob("*") if p.suffix in shown)
    files += sorted((REPO / "benchbox").rglob("*.py")) + [REPO / ".ci" / "run"]
    return [p for p in files if "pip install" in p.read_text()]


def checkout_paths(path: Path) -> set[str]:
    """Paths that hold a checkout of this repository where the file's commands run.

    The README's and docs' commands run in the repository root; a workflow checks the repository
    out at each ``path:`` of its ``actions/checkout`` steps.
    """
    if path.suffix in {".yml", ".yaml"}:
        return {m for m in re.findall(r"^\s*path:\s*(\S+)\s*$", path.read_text(), re.M)}
    return {"."}


def install_lines(text: str, suffix: str = ".md") -> list[str]:
    """Each ``pip install ...`` command in a text: up to the end of its line, a shell separator or a
    closing quote or backtick of the prose around it; shell comments dropped.

    Prose may break a command's line (``pip install`` then its arguments on the next line), and
    Python source may split a message over adjacent string literals: both are joined first.
    """
    text = re.sub(r"pip install\s*\n\s*", "pip install ", text)
    if suffix == ".py":
        text = re.sub(r"[\"']\s*\n\s*f?[\"']", "", text)
    out = []
    for line in text.splitlines():
        if suffix in {".yml", ".yaml", ".sh", ""}:  # shell (.ci/run has no suffix): comments dropped
            line = re.split(r"(?:^|\s)#", line)[0]
        for m in re.finditer(r"pip install\b([^`\"\n]*)", line):
            args = re.split(r"&&|\|\||;|\s#\s|\s#$", m.group(1))[0]
            out.append(args.strip())
    return out


def requirements(args: str) -> list[str]:
    """The requirements (names or paths) of one ``pip install`` command's arguments."""
    words = shlex.split(args, comments=True)
    reqs, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w in VALUE_OPTIONS:
            skip = True
        elif w.startswith("-") and w not in ("-e", "--editable"):
            continue
        elif w not in ("-e", "--editable"):
            reqs.append(re.sub(r"[),:;]+$", "", w))  # prose around a quoted requirement
    return reqs


def problems(path: Path) -> list[str]:
    """What in one file's install lines does not install this project."""
    found = []
    for args in install_lines(path.read_text(), path.suffix):
        for req in requirements(args):
            base, _, extras = req.partition("[")
            # an extra filled in at run time (an f-string's ``{extra}``) is checked where it is chosen
            asked = {e.strip() for e in extras.rstrip("]").split(",") if e.strip() and "{" not in e}
            if base.startswith((".", "/")) or "/" in base:
                target = (base.rstrip("/") or "/").removeprefix("./") or "."
                if target not in checkout_paths(path):
                    found.append(f"{req!r}: not a checkout of this repository")
            else:
                m = REQUIREMENT.match(req)
                name = m.group(1) if m else req
                if not _normal(name or "").startswith("benchbox"):
                    continue
                if _normal(name) != _normal(NAME):
                    found.append(f"{req!r}: installs {name!r}, not this project ({NAME!r})")
            if asked - EXTRAS:
                found.append(f"{req!r}: no such extra {sorted(asked - EXTRAS)}")
    return found


@pytest.mark.parametrize("path", shown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_install_line_installs_this_project(path: Path) -> None:
    assert not problems(path), (str(path.relative_to(REPO)), problems(path))


def test_the_readme_and_the_ci_recipe_show_install_lines() -> None:
    shown = {p.relative_to(REPO).as_posix() for p in shown_files()}
    assert {"README.md", "examples/ci/benchbox.yml", ".ci/run"} <= shown


def test_the_check_refuses_the_pypi_namesake_and_unknown_paths(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("```sh\npip install benchbox\npip install -e ../elsewhere\n"
                      "pip install 'benchbox[nope]'\n```\n")
    said = problems(readme)
    assert len(said) == 4, said
    assert "not this project" in said[0] and "not a checkout" in said[1]
    readme.write_text(f"`pip install torch==2.13.0 -e '.[dev]'` and `pip install '{NAME}[matrix]'`\n")
    assert problems(readme) == []
    recipe = tmp_path / "bench.yml"
    recipe.write_text("steps:\n  - uses: actions/checkout@v4\n    with:\n      path: head\n"
                      "  - run: |\n      python -m pip install benchbox  # not: pip install benchbox\n")
    assert len(problems(recipe)) == 1
    recipe.write_text(recipe.read_text().replace("install benchbox  #", "install ./head  #"))
    assert problems(recipe) == []


def test_the_distribution_is_ours_and_the_import_and_command_keep_their_name() -> None:
    assert _normal(NAME) != "benchbox"  # the PyPI namesake is another project
    assert PYPROJECT["project"]["scripts"] == {"benchbox": "benchbox.__main__:entry"}
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["benchbox*"]
