"""The build backend of the mcplug wheel: setuptools' own, with the two native libraries added.

``pip install ./bindings/python`` (or ``pip wheel``) runs ``cargo build --release`` for
libmcplug and libmcplug_schema in the checkout this folder belongs to, strips the copies it
puts into the wheel's ``mcplug/`` (the loader looks there first; libmcplug finds its validator
library beside itself), and tags the wheel for the platform but for no Python version or ABI:
ctypes loads the libraries, there is no extension module. The unstripped libraries, with their
debug info, stay in the checkout's ``target/release``.

Environment: ``CARGO`` (the cargo to run; default ``cargo``), ``MCPLUG_BUILD_LIBRARY_DIR`` (take
already built libraries from that folder instead of running cargo).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent.parent  # bindings/python
CHECKOUT = HERE.parent.parent
#: The library is built for Linux only (see the README's supported platforms).
LIBRARIES = ["libmcplug.so", "libmcplug_schema.so"]


def _built_libraries() -> Path:
    if not sys.platform.startswith("linux"):
        raise RuntimeError(f"mcplug: the package carries Linux libraries only; cannot build it on {sys.platform}")
    given = os.environ.get("MCPLUG_BUILD_LIBRARY_DIR")
    if given:
        return Path(given)
    if not (CHECKOUT / "Cargo.toml").is_file() or not (CHECKOUT / "src" / "schema").is_dir():
        raise RuntimeError(
            f"mcplug: the Rust sources are not at {CHECKOUT} (this package is built from the mcplug "
            "checkout: pip install ./bindings/python there), and MCPLUG_BUILD_LIBRARY_DIR is not set"
        )
    cargo = os.environ.get("CARGO", "cargo")
    if shutil.which(cargo) is None:
        raise RuntimeError(f"mcplug: `{cargo}` is not on PATH: building the wheel needs a Rust toolchain (rustup.rs)")
    command = [cargo, "build", "--release", "--lib", "-p", "mcplug", "-p", "mcplug-schema"]
    print("mcplug: " + " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, cwd=CHECKOUT, check=True)
    return CHECKOUT / "target" / "release"


class BuildPyWithLibraries(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        source = _built_libraries()
        target = Path(self.build_lib) / "mcplug"
        target.mkdir(parents=True, exist_ok=True)
        for name in LIBRARIES:
            built = source / name
            if not built.is_file():
                raise RuntimeError(f"mcplug: {built} was not built")
            shutil.copyfile(built, target / name)
            os.chmod(target / name, 0o755)
            strip = shutil.which("strip")
            if strip and sys.platform != "darwin":
                subprocess.run([strip, "--strip-debug", "--strip-unneeded", str(target / name)], check=True)


def _bdist_wheel() -> Any:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:  # setuptools before 70.1
        from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

    class PlatformWheel(bdist_wheel):  # type: ignore[misc,valid-type]
        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self) -> Any:
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    return PlatformWheel


def cmdclass() -> Dict[str, Any]:
    """The commands setup.py hands setuptools."""
    return {"build_py": BuildPyWithLibraries, "bdist_wheel": _bdist_wheel()}


# The PEP 517 hooks are setuptools' own (setup.py brings the commands above in).
from setuptools.build_meta import *  # noqa: E402,F401,F403
