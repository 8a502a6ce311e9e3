"""argostranslate (argos-translate-lt, LibreTranslate) in a virtual environment of its own, run offline: the
harness of benchmarks/export_bench.py's Argos row (benchmarks/export_timing.py run by that environment's
Python) and of the Argos tests (tests/export/argos_driver.py), so that the figures the benchmark reports are
for the setup these tests check.

`argos_python` makes (once) a virtual environment with the given requirements; `run_offline` runs that Python
under `unshare -n` where it can, with ./sitecustomize.py refusing any connection beyond loopback.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

OFFLINE = Path(__file__).parent  # the network guard
ROOT = OFFLINE.parents[1]
# LibreTranslate 1.9.6 pins argos-translate-lt 1.12.1 (argostranslate without torch) and minisbd 0.9.5.
LIBRETRANSLATE = ("libretranslate==1.9.6",)
ARGOSTRANSLATE = ("argos-translate-lt==1.12.1",)  # the argostranslate LibreTranslate 1.9.6 runs, alone


def argos_python(cache: Path, requirements: tuple[str, ...]) -> Path:
    """The Python of a virtual environment with `requirements`, made once and kept under `cache` (keyed by the
    requirements and this Python's version: a change makes a new one). Installing needs PyPI; a failure to
    install is a RuntimeError holding pip's last words."""
    key = hashlib.sha256(json.dumps([platform.python_version(), *requirements]).encode()).hexdigest()
    venv = cache / f"argos-venv-{key[:12]}"
    python = venv / "bin" / "python"
    if not (venv / "complete").is_file():
        shutil.rmtree(venv, ignore_errors=True)
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements]
        result = subprocess.run(pip, capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"cannot install {requirements} from PyPI: {result.stderr.strip()[-300:]}")
        (venv / "complete").write_text(f"made in {time.monotonic() - started:.0f} s\n")
    return python


@functools.cache
def network_namespace() -> list[str]:
    """`unshare -n` where a new network namespace can be made (as root), else nothing (the guard remains)."""
    usable = shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return ["unshare", "-n"] if usable and usable.returncode == 0 else []


def environment(home: Path) -> dict[str, str]:
    """This process's environment without Python's, Argos Translate's and LibreTranslate's settings; their
    folders under `home`, and the network guard on the path."""
    if "stanza" in str(home):
        raise ValueError(f"{home}: argostranslate picks its splitter by searching the path for 'stanza'")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ARGOS_", "LT_", "PYTHON"))}
    folders = {"XDG_DATA_HOME": "data", "XDG_CONFIG_HOME": "config", "XDG_CACHE_HOME": "cache"}
    folders |= {"ARGOS_PACKAGES_DIR": "packages"}
    env |= {key: str(home / folder) for key, folder in folders.items()}
    return env | {"HOME": str(home), "PYTHONPATH": str(OFFLINE)}


def run_offline(python: Path, args: list[str], home: Path, stdin: str = "") -> str:
    """The standard output of `python ARGS` (given `stdin`) from the repository's root, run offline with
    argostranslate's folders under `home`; a command that fails or tries to reach the network is a
    RuntimeError."""
    env = environment(home) | {"PYTHONPATH": os.pathsep.join([str(OFFLINE), str(ROOT)])}
    command = [*network_namespace(), str(python), *args]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, cwd=ROOT)
    if result.returncode:
        raise RuntimeError(
            f"{' '.join(args)} failed in Argos Translate's environment:\n{result.stderr[-3000:]}"
        )
    if "offline guard" in result.stderr + result.stdout:
        raise RuntimeError(f"argostranslate tried to reach the network:\n{result.stderr[-3000:]}")
    return result.stdout
