# The native libraries' part of the build (see _build/mcplug_build.py); the metadata is in pyproject.toml.
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build"))
import mcplug_build  # noqa: E402

setup(cmdclass=mcplug_build.cmdclass())
