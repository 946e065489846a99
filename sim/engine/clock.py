"""The replay's clock and event heap: a :class:`simpy.Environment` that also schedules at absolute times.

Every event of a replay is a simpy event on one :class:`Clock`. Events at equal times fire in priority
order, then in the order they were scheduled:

``NETWORK`` (0)
    the network process's wake-up at its next completion (bytes move before anything else happens then);
``EVENT`` (1)
    rank programs issuing steps, transfers starting and ending, ops finishing, anomalies;
``START`` (2)
    the batch of ops whose members all issued them in this instant (memoisation looks at them together);
``FLUSH`` (3)
    the transfers that start in this instant enter the network in one call (one re-solve).

So the work of one instant is batched: per-event cost stays a few numpy calls per batch, not per flow.
Events are scheduled at absolute times (:meth:`Clock.at`), not as ``now + delay``: in floats
``now + (t - now)`` need not be ``t``, and events meant for the same instant must meet there.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import Event

__all__ = ["EVENT", "FLUSH", "NETWORK", "START", "At", "Clock"]

NETWORK, EVENT, START, FLUSH = 0, 1, 2, 3


class At(Event):
    """An event that fires at absolute time ``t`` (simpy's :class:`~simpy.events.Timeout`, with a time
    instead of a delay; written as simpy writes its own timeouts).

    Examples
    --------
    >>> clock = Clock()
    >>> ev = At(clock, 0.3, value="x")
    >>> clock.run(); clock.now, ev.value
    (0.3, 'x')
    """

    def __init__(self, clock: Clock, t: float, priority: int = EVENT, value: Any = None) -> None:
        self.env = clock
        self.callbacks = []
        self._value = value
        self._ok = True
        clock.schedule_at(self, t, priority)


class Clock(simpy.Environment):
    """A simpy environment with absolute-time scheduling (see the module docstring).

    Examples
    --------
    >>> clock, seen = Clock(), []
    >>> _ = clock.call_at(2.0, EVENT, seen.append, "b"), clock.call_at(2.0, NETWORK, seen.append, "a")
    >>> clock.run(); seen
    ['a', 'b']
    """

    def schedule_at(self, event: Event, t: float, priority: int = EVENT) -> None:
        """Put a triggered ``event`` on the heap at time ``t`` (``>= now``)."""
        heappush(self._queue, (t, priority, next(self._eid), event))

    def at(self, t: float, priority: int = EVENT, value: Any = None) -> At:
        """An event firing at time ``t`` (``yield clock.at(t)`` in a process sleeps until then)."""
        return At(self, t, priority, value)

    def call_at(self, t: float, priority: int, fn: Callable[..., Any], *args: Any) -> At:
        """Call ``fn(*args)`` at time ``t`` (with ``priority`` among the events of that instant)."""
        ev = At(self, t, priority)
        ev.callbacks.append(lambda _ev: fn(*args))
        return ev

    def trigger_at(self, event: Event, t: float, priority: int = EVENT, value: Any = None) -> None:
        """Trigger a pending ``event`` (one a process waits for) at time ``t``."""
        event._ok = True   # what Event.succeed does, at a time of our choosing
        event._value = value
        self.schedule_at(event, t, priority)

    def run_until(self, event: Event) -> bool:
        """Process events until ``event`` has fired (True) or none is left (False: it never fires)."""
        if event.callbacks is None:
            return True
        event.callbacks.append(StopSimulation.callback)
        try:
            while True:
                self.step()
        except StopSimulation:
            return True
        except EmptySchedule:
            return False
