"""Run a hand-run comparison script inside its own virtual environment.

`ensure(modules, name, packages)` returns when every module in `modules` imports. Otherwise it
creates a virtual environment under $XDG_CACHE_HOME/dpx/<name> (else ~/.cache/dpx/<name>),
installs `packages` from PyPI into it and re-executes the calling script there (once: a second
failure exits with a message). dpx itself never depends on Python; only the scripts in this
folder that compare it with Python libraries use this.
"""

import importlib
import os
import subprocess
import sys


def ensure(modules, name, packages):
    try:
        for module in modules:
            importlib.import_module(module)
        return
    except ImportError:
        pass
    marker = "DPX_PRIVATE_ENV_" + name.upper().replace("-", "_")
    if os.environ.get(marker):
        sys.exit(f"{', '.join(modules)} still missing after installing {', '.join(packages)}; "
                 "see the pip output above")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = os.path.join(cache, "dpx", name)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", venv])
        subprocess.check_call([python, "-m", "pip", "install", "--quiet", *packages])
    os.execve(python, [python] + sys.argv, dict(os.environ, **{marker: "1"}))
