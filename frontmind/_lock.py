"""One process per data directory: an exclusive `flock` on `frontmind.lock` inside it.

Two daemons (or a daemon and a library user) on one directory would each keep their own
view of every conversation and miss the other's turns. The lock is held for the life of
`Frontmind.open`; the kernel drops it when the process dies, however it dies, so a stale
file never blocks a restart. The file holds the holder's pid, for the error message.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from storage import InvalidInput, StorageUnavailable

from ._exceptions import DataDirLocked

__all__ = ["LOCK_FILE", "check_not_lock", "data_dir_lock"]

LOCK_FILE = "frontmind.lock"


@contextmanager
def data_dir_lock(directory: Path) -> Iterator[None]:
    """Hold the directory's lock for the block; `DataDirLocked` if another holds it."""
    path = directory / LOCK_FILE
    try:
        # The directory holds every user's conversations: its owner's alone (a directory
        # that exists keeps the mode its owner gave it).
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StorageUnavailable(f"cannot open the data directory {directory}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            # The holder may be this very process (a second `Frontmind.open` of the
            # directory, an app's own mistake): "another process" with its own pid sent
            # the reader looking for a process that is not there.
            who = (
                "another Frontmind instance in this process"
                if holder == str(os.getpid())
                else "another Frontmind process"
            )
            raise DataDirLocked(
                f"the data directory {directory} is in use by {who} (pid {holder})"
            ) from None
        # The pid is for that message alone: the lock is the flock, held already. On a
        # full disk (or a file system that fails writes) the store says what is wrong.
        with suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def check_not_lock(path: Path, directory: Path) -> None:
    """Refuse `path` as a file to write whole (a backup, written aside and renamed) when
    it is `directory`'s lock file: the rename would put a new file in the lock's place,
    the holder would keep its lock on the old one, and a second process would then lock
    the new file and open the directory beside it."""
    lock = directory / LOCK_FILE
    try:
        same = path.resolve() == lock.resolve() or (path.exists() and path.samefile(lock))
    except (OSError, ValueError):
        return  # a path that cannot be looked up is not the lock; the writer refuses it
    if same:
        raise InvalidInput(
            f"the path {str(path)!r} is the data directory's lock file ({LOCK_FILE}): "
            "write to another file"
        )
