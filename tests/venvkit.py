"""A fresh virtual environment with scorer installed from this checkout, as a user's would be: for the
tests that install plugin distributions with pip and run the ``scorer`` command of that environment.

``FreshVenv(directory)`` creates ``directory/venv`` and pip-installs the checkout into it; ``run``
runs one of its commands in ``directory`` and asserts it succeeded. Its ``env`` is this process's
environment less what would make the environment's scorer differ from a user's: ``PYTHONPATH`` (the
checkout's modules), ``SCORER_DISABLE_PLUGIN_AUTOLOAD`` (installed plugins must load) and
``VIRTUAL_ENV``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class FreshVenv:
    """``directory/venv`` with scorer installed from ``REPO`` (about 20 s)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.root = directory / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(self.root)], check=True, timeout=300)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "SCORER_DISABLE_PLUGIN_AUTOLOAD", "VIRTUAL_ENV")}
        self.run("python", "-m", "pip", "install", "--quiet", str(REPO), timeout=900)

    def bin(self, command: str) -> Path:
        """The path of ``command`` in the environment (``python``, ``pip``, ``scorer``, ``pytest``)."""
        return self.root / "bin" / command

    def run(self, command: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
        """``command args...`` of the environment, run in ``directory``; asserts exit status 0."""
        done = subprocess.run([str(self.bin(command)), *args], capture_output=True, text=True, env=self.env,
                              cwd=self.directory, timeout=timeout)
        assert done.returncode == 0, f"{command} {args}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done
