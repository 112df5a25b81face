"""Find a problem class from what a user names: a registered name, a file ``my_problem.py[:Class]`` or
``package.module:Class``.  Used by the command line, :func:`elecsolver.load` and queries; it imports no part of
the command line."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["UsageError", "load_problem_class"]


class UsageError(ValueError):
    """Bad command-line input: reported as one line, exit code 2."""


def load_problem_class(spec: str):
    """The Problem subclass named by ``spec`` (registered name, ``file.py[:Class]`` or ``module:Class``).

    Raises
    ------
    UsageError
        If nothing or more than one class matches (the message says what to write instead).
    """
    from .problem import Problem
    from .problems import REGISTRY, get_problem_class

    if spec in REGISTRY:
        return get_problem_class(spec)
    target, _, attr = spec.partition(":")
    if target.endswith(".py") or os.sep in target or Path(target).is_file():
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"problem file {target} does not exist; give a registered name "
                             f"({', '.join(sorted(REGISTRY))}) or an existing .py file")
        name = f"elecsolver_user_{path.stem}_{abs(hash(str(path.resolve())))}"
        module = sys.modules.get(name)
        if module is None:
            folder = str(path.resolve().parent)
            if folder not in sys.path:  # as `python file.py` does: the file may import the files beside it
                sys.path.insert(0, folder)
            spec_ = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec_)
            sys.modules[name] = module
            try:
                spec_.loader.exec_module(module)
            except ImportError as exc:
                sys.modules.pop(name, None)
                raise UsageError(f"{target}: {exc} (the file's folder {folder} is on the import path; install or "
                                 "place the module there)") from None
    elif attr:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise UsageError(f"cannot import {target!r} ({exc}); check the module path") from None
    else:
        raise UsageError(f"unknown problem {spec!r}; registered problems: {', '.join(sorted(REGISTRY))} (or give "
                         "a file my_problem.py, or package.module:Class)")
    if attr:
        cls = getattr(module, attr, None)
        if not (isinstance(cls, type) and issubclass(cls, Problem)):
            raise UsageError(f"{target} has no Problem subclass named {attr!r}")
        return cls
    found = [c for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, Problem) and c.__module__ == module.__name__]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise UsageError(f"{target} defines {len(found)} Problem subclasses ({names}); name one as {target}:Class")
    return found[0]
