"""The one atomic-write helper: every file the package writes goes through :func:`atomic_path`.

A file is written under a temporary name in its destination folder and renamed over the final
name (``os.replace``, atomic on POSIX within one file system) only once it is complete, so a
reader never sees a half-written file and an existing file is replaced only by a complete one.
On an exception the temporary file is removed and the destination is left as it was.

The temporary file is created by :func:`tempfile.mkstemp`, which gives mode 0600; before the
rename its mode is set to 0666 minus the process umask, as ``open()`` would have created it, so a
colleague or a ParaView server running as another user can read the outputs (umask 022 -> 0644).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["WriteError", "atomic_path", "current_umask", "remove_stale", "write_json", "write_text"]


def current_umask() -> int:
    """The process umask (read by setting and restoring it; the package is not multi-threaded here)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike) -> Iterator[pathlib.Path]:
    """Yield a temporary path next to ``final``; on success give it the umask's mode and move it to ``final``.

    Parameters
    ----------
    final : path
        Destination file; its folder must exist.

    Raises
    ------
    WriteError
        If the folder is missing or not writable, or the write fails (a full disk): nothing is left behind and
        ``final`` is as it was.
    """
    final = pathlib.Path(final)
    try:
        fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    except OSError as exc:
        raise WriteError(final, exc) from exc
    os.close(fd)
    tmp = pathlib.Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, final)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteError) or _is_write_failure(exc):
            raise WriteError(final, exc) from exc
        raise


_TEMPORARY = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")  # mkstemp's names in atomic_path: .NAME.XXXXXXXX.tmp


def remove_stale(folder: str | os.PathLike) -> list[str]:
    """Remove the temporary files a killed process left in ``folder`` (``.NAME.XXXXXXXX.tmp``, never renamed over
    NAME, which is intact); returns their names.  Call it only where no other process is writing to ``folder``."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.is_file(follow_symlinks=False) and _TEMPORARY.match(entry.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return sorted(removed)


class WriteError(OSError):
    """A file could not be written (a full disk, a folder removed, a quota): the destination was left as it was.

    ``str()`` is one line: ``cannot write PATH: REASON``; ``errno`` and ``filename`` are those of the failure
    (``filename`` the destination, not the temporary name).
    """

    def __init__(self, final: pathlib.Path, cause: BaseException):
        code = getattr(cause, "errno", None)
        text = str(cause)
        if code is None:  # h5py and torch put the errno in their text: "errno = 28, error message = '...'"
            found = re.search(r"errno = (\d+)", text)
            code = int(found.group(1)) if found else None
        if code:
            reason = os.strerror(code)
        elif _is_write_failure(cause):  # torch.save: the write stopped short
            try:
                free = f"{shutil.disk_usage(final.parent).free / 2**20:.1f} MiB"
            except OSError:
                free = "unknown space"
            reason = f"the write stopped short ({free} free on that file system; is it full?)"
        else:
            reason = text.splitlines()[0] if text else type(cause).__name__
        super().__init__(code, reason, str(final))

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _is_write_failure(exc: BaseException) -> bool:
    """torch.save reports a failed write as a RuntimeError ("... failed writing file ..." / "unexpected pos")."""
    return isinstance(exc, RuntimeError) and ("writing file" in str(exc) or "unexpected pos" in str(exc))


def write_text(final: str | os.PathLike, text: str) -> pathlib.Path:
    """Write ``text`` (UTF-8) to ``final`` atomically; returns the path."""
    with atomic_path(final) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return pathlib.Path(final)


def write_json(final: str | os.PathLike, data: Any, default: Callable[[Any], Any] | None = None) -> pathlib.Path:
    """Write ``data`` as indented JSON (keys in their order) to ``final`` atomically; returns the path."""
    return write_text(final, json.dumps(data, indent=2, default=default) + "\n")
