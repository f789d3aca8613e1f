"""The README's programs run as written: every fenced ```c, ```python and ```js block that is not
marked `<!-- excerpt -->` is a whole program, run here the way an installed-package user would run
it (`#include <mcplug.h>`, `import mcplug`, `require('mcplug')`), against the reference server that
`npx -y @modelcontextprotocol/server-everything` finds in .deps/npm (no network)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import EVERYTHING_JS, REPO

BLOCK = re.compile(r"^```(c|python|js)\n(.*?)^```$", re.S | re.M)
EXCERPT = "<!-- excerpt -->"


def readme_programs() -> List[Tuple[str, int, str]]:
    """(language, line, source) of each program block of the README."""
    text = (REPO / "README.md").read_text()
    programs = []
    for match in BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if before.strip() != EXCERPT:
            programs.append((match.group(1), text.count("\n", 0, match.start()) + 1, match.group(2)))
    return programs


PROGRAMS = readme_programs()


def test_the_readme_has_a_program_per_language() -> None:
    # A block that lost its fence language (or a README reshuffle) must not make this suite vacuous.
    assert sorted({language for language, _, _ in PROGRAMS}) == ["c", "js", "python"], PROGRAMS


@pytest.mark.parametrize("language,line,source", PROGRAMS, ids=[f"{lang}-line{line}" for lang, line, _ in PROGRAMS])
def test_readme_program_runs(language: str, line: int, source: str, tmp_path: Path) -> None:
    if not EVERYTHING_JS.exists():
        pytest.fail(f"server-everything missing ({EVERYTHING_JS}): run tests/install-deps.sh", pytrace=False)
    lib = REPO / "target" / "release"
    env = {k: v for k, v in os.environ.items() if k not in ("MCPLUG_LIBRARY", "PYTHONPATH")}
    if language == "c":
        program = tmp_path / "hello.c"
        program.write_text(source)
        cc = os.environ.get("CC", "cc")
        subprocess.run(
            [cc, "-Wall", "-Wextra", "-Werror", str(program), f"-I{REPO / 'include'}", f"-L{lib}", "-lmcplug",
             f"-Wl,-rpath,{lib}", "-o", str(tmp_path / "hello")],
            check=True,
        )
        command = [str(tmp_path / "hello")]
    elif language == "python":
        program = tmp_path / "program.py"
        program.write_text(source)
        env["PYTHONPATH"] = str(REPO / "bindings" / "python")
        command = [sys.executable, str(program)]
    else:
        # `require('mcplug')` resolves the way an installed package does: node_modules beside the program.
        (tmp_path / "node_modules").mkdir()
        (tmp_path / "node_modules" / "mcplug").symlink_to(REPO / "bindings" / "node")
        program = tmp_path / "program.js"
        program.write_text(source)
        command = [shutil.which("node") or "node", str(program)]
    # npx runs from .deps/npm, where the reference server is installed: nothing is downloaded.
    done = subprocess.run(command, cwd=REPO / ".deps" / "npm", env=env, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, f"README line {line} ({language}) exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "Echo: hi" in done.stdout, f"README line {line} ({language}) printed:\n{done.stdout}\n{done.stderr}"
