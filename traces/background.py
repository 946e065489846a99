"""One detached background job at a time, behind a lock file (the kernel builds after a run).

``simrun ingest`` builds the NCCL reader's ahead-of-time kernel (:mod:`traces.formats.nccl.kernel_aot`) and
``simrun run`` warms numba's cache (:mod:`sim.warmup`) in a process of their own that outlives the command.
Both take a lock file first (``O_EXCL``: one job per lock, whatever the number of commands starting at
once), take over a lock older than the job could run (its process died), and release it if the process
cannot start; the job itself removes the lock when done.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

__all__ = ["BUILD_ENV", "start_detached", "take_lock"]

#: Environment switch of both jobs: "0" keeps them from starting.
BUILD_ENV = "COLLSIM_KERNEL_BUILD"


def take_lock(lock: Path, stale_s: float) -> bool:
    """Create ``lock``, or take it over when it is older than ``stale_s`` seconds.

    Parameters
    ----------
    lock : Path
        The lock file.
    stale_s : float
        Age after which a lock counts as left by a job that died.

    Returns
    -------
    bool
        Whether this process holds the lock now (False: another job holds it, or the folder is not writable).

    Examples
    --------
    >>> import tempfile
    >>> lock = Path(tempfile.mkdtemp()) / "job.lock"
    >>> take_lock(lock, 60.0), take_lock(lock, 60.0)
    (True, False)
    """
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            if time.time() - lock.stat().st_mtime < stale_s:
                return False  # another process runs the job
            lock.unlink()
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError:
            return False
    except OSError:
        return False
    os.close(fd)
    return True


def start_detached(argv: list[str], cwd: Path, lock: Path, stale_s: float) -> bool:
    """Start ``argv`` in a new session with no input or output, once :func:`take_lock` gives ``lock``.

    Parameters
    ----------
    argv : list of str
        The command (the job removes ``lock`` when it ends).
    cwd : Path
        Its working folder.
    lock : Path
        The job's lock file.
    stale_s : float
        See :func:`take_lock`.

    Returns
    -------
    bool
        Whether the job was started (the lock is released again when it could not be).
    """
    if not take_lock(lock, stale_s):
        return False
    try:
        subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        lock.unlink(missing_ok=True)
        return False
    return True
