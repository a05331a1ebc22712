"""Child processes that end with the process that started them.

``kgqa bench run`` starts one ``kgqa run`` per cell, a Dask worker one ``kgqa run --shard`` per shard,
an embedded KG one query worker per concurrent query. Each child asks the kernel to signal it when
its parent ends (Linux ``PR_SET_PDEATHSIG``), so a parent stopped in any way — SIGKILL included —
leaves no orphan writing a run file that nothing saves, and holding its lock.

A ``kgqa`` command learns which process to end with from ``KGQA_PARENT_PID`` (:func:`child_env`
sets it for a child; :func:`end_with_parent`, called first thing by the command, reads it and drops
it, so the command's own children do not inherit it)."""

from __future__ import annotations

import os
import signal
import sys

#: The environment variable naming the process a ``kgqa`` command ends with.
PARENT_ENV = "KGQA_PARENT_PID"


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent ends (Linux); False elsewhere."""
    if sys.platform != "linux":
        return False
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0) == 0  # PR_SET_PDEATHSIG


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a ``kgqa`` child that must end with this process (``env``: the base,
    default this process's environment)."""
    return {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}


def end_with_parent() -> None:
    """When started through :func:`child_env`: end with SIGTERM when that parent ends (and at once
    when it has ended already). Nothing otherwise."""
    value = os.environ.pop(PARENT_ENV, "")
    try:
        parent = int(value)
    except ValueError:
        return
    die_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the parent ended before the signal was armed
        raise SystemExit(128 + signal.SIGTERM)
