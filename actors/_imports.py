"""Importing what a config's `use = "package.module:attribute"` names.

The module is imported as Python imports it. When its top-level package is on none of
Python's paths, it is looked for in the settings' `module_path` (`load_config` puts the
config file's own directory last in it) and then in the working directory, so a
`mytools.py` beside `frontmind.toml`, or where the command runs, needs no PYTHONPATH.
The directory it was found in is appended to `sys.path` (as Python does for a script's
directory), so the module's own imports of its neighbours work too; appended, not
prepended, so it never shadows an installed package.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from importlib.machinery import PathFinder
from types import ModuleType

__all__ = ["import_module_near"]


def import_module_near(name: str, search: Sequence[str] = ()) -> ModuleType:
    """Import `name`, also looking in `search` and the working directory; a module not
    found anywhere raises ModuleNotFoundError saying where it was looked for."""
    top = name.partition(".")[0]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != top:  # found, but something it imports (or a submodule) is missing
            raise
    places = [*dict.fromkeys([*(os.path.abspath(d) for d in search), os.getcwd()])]
    for place in places:
        if PathFinder.find_spec(top, [place]) is not None:
            if place not in sys.path:
                sys.path.append(place)
            importlib.invalidate_caches()
            return importlib.import_module(name)
    raise ModuleNotFoundError(
        f"no module named {top!r} on Python's path, nor in {', '.join(places)}: "
        f"put {top}.py (or the package {top}/) beside the config file or in the working "
        "directory, install it, or add its directory to PYTHONPATH",
        name=top,
    )
