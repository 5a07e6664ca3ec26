"""Find a CPython of a given version on this machine, without naming any one machine's paths.

``pythonX.Y`` on ``PATH`` first; a pyenv shim there may be on ``PATH`` yet refuse to run (its
version is not selected), so every candidate is run once and must report the version asked
for. pyenv's own install folder (``PYENV_ROOT``, else ``~/.pyenv``) is the fallback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["find_interpreter"]


_PROBE = (
    "import platform, sys; "
    "print(platform.python_implementation(), *sys.version_info[:2], sys.executable)"
)


def _resolved(executable: Path, version: str) -> Path | None:
    """The interpreter behind ``executable`` (a shim resolves to the real one) when it runs
    as CPython ``version`` (``"3.12"``), else ``None``."""
    try:
        done = subprocess.run(
            [str(executable), "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split(maxsplit=3)
    if done.returncode != 0 or words[:3] != ["CPython", *version.split(".")] or len(words) < 4:
        return None
    return Path(words[3].strip())


def _pyenv_candidates(version: str) -> list[Path]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = root.glob(f"versions/{version}.*/bin/python{version}")
    return sorted(found, key=lambda path: _patch(path.parent.parent.name), reverse=True)


def _patch(name: str) -> tuple[int, ...]:
    parts = name.split(".")
    return tuple(int(part) if part.isdigit() else -1 for part in parts)


def find_interpreter(version: str) -> Path | None:
    """An interpreter that runs as CPython ``version``, or ``None``."""
    on_path = shutil.which(f"python{version}")
    candidates = [Path(on_path)] if on_path else []
    candidates += _pyenv_candidates(version)
    for candidate in candidates:
        found = _resolved(candidate, version)
        if found is not None:
            return found
    return None
