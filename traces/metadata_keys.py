"""Types of the optional ``collsim`` metadata keys that consumers read (SPEC §3 and the extension keys).

:func:`traces.checks.check_metadata` calls :func:`check_optional_keys` after the required keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from traces.atomic import short_repr
from traces.errors import TraceError

__all__ = ["check_optional_keys", "is_int"]


def is_int(value: Any) -> bool:
    """True for a Python or numpy integer that is not a bool (JSON metadata's integers).

    Examples
    --------
    >>> is_int(3), is_int(np.int64(3)), is_int(True), is_int(3.0)
    (True, True, False, False)
    """
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_optional_keys(meta: Mapping[str, Any]) -> None:
    """The optional metadata keys that consumers read (SPEC §3 and the extension keys): each of its type.

    ``parallelism`` a mapping, ``notes`` a list of strings, ``model`` a string, ``time_origin_s`` a finite
    number, ``rings`` a mapping of comm id to a list of rings (lists of integer ranks); the simulator
    then checks each ring against its communicator.

    Examples
    --------
    >>> check_optional_keys({"parallelism": "tp=8"})
    Traceback (most recent call last):
    ...
    traces.errors.TraceError: metadata 'parallelism' must be a JSON object, got 'tp=8'
    """
    for key, kind, what in (("parallelism", Mapping, "a JSON object"), ("model", str, "a string"),
                            ("notes", list, "a list of strings"), ("rings", Mapping, "a JSON object")):
        value = meta.get(key)
        if value is not None and not isinstance(value, kind):
            raise TraceError(f"metadata '{key}' must be {what}, got {short_repr(value)}")
    if not all(isinstance(n, str) for n in meta.get("notes") or ()):
        raise TraceError(f"metadata 'notes' must be a list of strings, got {short_repr(meta['notes'])}")
    origin = meta.get("time_origin_s")
    if origin is not None and (not isinstance(origin, int | float) or isinstance(origin, bool)
                               or not np.isfinite(origin)):
        raise TraceError(f"metadata 'time_origin_s' must be a finite number of seconds, got {short_repr(origin)}")
    for comm, rings in (meta.get("rings") or {}).items():
        if not isinstance(rings, list) or not all(isinstance(r, list) and all(map(is_int, r)) for r in rings):
            raise TraceError(f"metadata 'rings'[{short_repr(comm)}] must be a list of rings (lists of ranks), "
                             f"got {short_repr(rings)}")
