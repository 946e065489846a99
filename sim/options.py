"""``SimOptions``: every option of :func:`sim.simulate` in one place (names, types, defaults, aliases, limits).

``simulate``, ``simrun run`` and ``simrun sweep`` read their simulator options through this one frozen
dataclass, so the three agree on what a name means and on what value is allowed. A value is either used
exactly or refused with a one-line :class:`~sim.errors.OptionError` (a ``ValueError``) naming the option,
the value and the limit: never silently replaced by a default.

``--set KEY=VALUE`` items are split here too (:func:`split_set`): a key that names a simulator option (or
an alias of one) goes to the simulator, every other key to the topology builder. The limits and the check
of each value are :mod:`sim.option_values` (re-exported here).

Examples
--------
>>> opts = SimOptions.from_mapping({"quantile": 0, "fail_links": "2"})
>>> opts.completion_quantile, opts.fail_links
(0.0, 2)
>>> split_set({"k": 8, "fail_links": 2, "quantile": 0.05})
({'fail_links': 2, 'quantile': 0.05}, {'k': 8})
>>> SimOptions(bin_s=0)
Traceback (most recent call last):
...
sim.errors.OptionError: bin_s=0: must be a number of seconds > 0 (omit it for adaptive bins)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.errors import OptionError
from sim.option_values import (
    ALGOS,
    CHECKS,
    MAX_CHANNELS,
    MAX_DELAY_US,
    MAX_SEED,
    MAX_TIME_BINS,
    MODELS,
    ROUTINGS,
    TIMINGS,
    check_bin_count,
    check_seed,
)

#: Other spellings of an option (``--set quantile=0.01`` is ``completion_quantile``).
ALIASES: dict[str, str] = {"quantile": "completion_quantile"}
#: Options that ``--set`` may not give: their own flag gives them, or they are not a value on a command line.
_NOT_SET = {"algo": "--algo", "routing": "--routing", "seed": "--seed", "progress": "",
            "trace_name": "", "topology_params": "", "processes": "",
            "model": "--model", "flows_out": ""}


def _doc(text: str, **meta: Any) -> dict[str, Any]:
    return {"doc": text, **meta}


@dataclass(frozen=True)
class SimOptions:
    """Options of one simulation, checked on construction.

    Attributes
    ----------
    algo : {"auto", "ring", "tree", "direct"}
        Collective algorithm (``auto`` chooses per op and size as NCCL does).
    routing : {"ecmp", "spray", "single", "dmodk"}
    seed : int
        0 to ``MAX_SEED``; seeds routing and the choice of failed / degraded links.
    timing : {"auto", "gaps", "trace", "asap"}
        ``gaps`` keeps each rank's recorded compute gaps and lets the network move what follows (what-if
        replay), ``trace`` honours recorded issue times as floors, ``asap`` issues back to back; ``auto`` =
        gaps when every ``t_start_s`` is known, else asap.
    completion_quantile : float
        Completion batching of the flow network, ``0 <= q < 1``; 0 re-solves at every completion (exact).
        Alias ``quantile``.
    bin_s : float, optional
        Width of the utilisation bins in seconds (> 0, at most ``MAX_TIME_BINS`` bins); adaptive when None.
    channels : int, optional
        Channels of every collective, 1 to ``MAX_CHANNELS``; NCCL's size rule when None.
    memoize : bool
        Exact replay of identical idle phases.
    ideal : bool
        Also run the non-blocking reference fabric (``ideal_makespan_s``, each collective's ``ideal_s``).
    fail_links : int, str or tuple of str, optional
        How many switch-to-switch cables fail (seeded), or their names ``u-v``.
    degrade_links : str or mapping, optional
        ``"N:FACTOR"``, ``"u-v:FACTOR,..."`` or ``{link: factor}``.
    stragglers : dict of int to float
        ``{rank: delay_us}``; also given as ``["RANK:DELAY_US", ...]`` or ``"R:D,R:D"``.
    progress : callable, optional
        Called with the fraction done.
    trace_name : str, optional
        The ``trace`` of the summary (default: the trace metadata's name).
    topology_params : dict
        Builder parameters when the topology is a preset name or YAML path.
    processes : tuple of callables
        User simpy processes ``fn(env, net)`` (generators) run beside the replay (:mod:`sim.engine`).
    model : {"flow", "analytical", "both"}
        The tier: the flow-level event replay, per-collective bounds of the same plans with no event loop
        (:mod:`sim.analytical`), or both side by side.
    flows_out : str, optional
        Write every flow of the replay to this Parquet file as flows finish (:mod:`sim.results.flowfile`);
        without it the run keeps only a bounded sample of its flows.
    """

    algo: str = field(default="auto", metadata=_doc("collective algorithm"))
    routing: str = field(default="ecmp", metadata=_doc("routing of the flows"))
    seed: int = field(default=0, metadata=_doc("seed of routing and anomalies"))
    timing: str = field(default="auto", metadata=_doc("replay timing"))
    completion_quantile: float = field(default=0.0, metadata=_doc("completion batching, 0 = exact"))
    bin_s: float | None = field(default=None, metadata=_doc("utilisation bin width"))
    channels: int | None = field(default=None, metadata=_doc("channels per collective"))
    memoize: bool = field(default=True, metadata=_doc("replay identical idle phases from memory"))
    ideal: bool = field(default=True, metadata=_doc("run the non-blocking reference"))
    fail_links: int | str | tuple[str, ...] | None = field(default=None, metadata=_doc("failed cables"))
    degrade_links: str | Mapping | tuple[str, ...] | None = field(default=None, metadata=_doc("slow cables"))
    stragglers: Mapping[int, float] = field(default_factory=dict, metadata=_doc("rank delays in us"))
    progress: Callable[[float], None] | None = field(default=None, compare=False, metadata=_doc("callback"))
    trace_name: str | None = field(default=None, metadata=_doc("trace name of the summary"))
    topology_params: Mapping[str, Any] = field(default_factory=dict, metadata=_doc("builder parameters"))
    processes: tuple[Callable, ...] = field(default=(), compare=False, metadata=_doc("user simpy processes"))
    model: str = field(default="flow", metadata=_doc("simulation tier"))
    flows_out: str | None = field(default=None, metadata=_doc("per-flow Parquet output"))

    def __post_init__(self) -> None:
        for name, check in CHECKS.items():
            object.__setattr__(self, name, check(getattr(self, name)))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], **base: Any) -> SimOptions:
        """Options from keyword-style ``values`` (aliases allowed) over ``base``.

        Raises
        ------
        OptionError
            For an unknown name, an option given twice (under two spellings), or a bad value.
        """
        merged: dict[str, Any] = {}
        for key, value in base.items():
            merged[_known_name(key)] = value
        seen: dict[str, str] = {}
        for key, value in values.items():
            name = _known_name(key)
            if name in seen:
                raise OptionError(f"option {name!r} given twice (as {seen[name]!r} and {key!r}); give it once")
            seen[name] = key
            merged[name] = value
        return cls(**merged)

    def replace(self, **changes: Any) -> SimOptions:
        """A copy with ``changes`` (names or aliases), checked again."""
        return SimOptions.from_mapping(changes, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

    def plan_options(self) -> dict[str, Any]:
        """Keyword arguments of ``plan_collective`` fixed by these options (``channels``)."""
        return {} if self.channels is None else {"channels": self.channels}


def split_set(items: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set`` items -> ``(simulator options, topology parameters)``, keys as given.

    A key that names a simulator option or its alias is the simulator's; every other key is a topology
    parameter (checked by the builder).

    Raises
    ------
    OptionError
        For a simulator option that ``--set`` cannot give (``seed``: use ``--seed``).

    Examples
    --------
    >>> split_set({"oversubscription": 2, "timing": "asap"})
    ({'timing': 'asap'}, {'oversubscription': 2})
    """
    sim, topo = {}, {}
    for key, value in items.items():
        if key in _NOT_SET:
            flag = _NOT_SET[key]
            how = f"give it as {flag}" if flag else "it is not a --set option"
            raise OptionError(f"--set {key}: {how}")
        (sim if key in SET_KEYS else topo)[key] = value
    return sim, topo


def set_options(items: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """``--set`` items -> (simulator options under their own names, the spelling each was given in,
    topology parameters).

    Raises
    ------
    OptionError
        For an option given under two spellings (``quantile`` and ``completion_quantile``), or one that
        ``--set`` cannot give.

    Examples
    --------
    >>> set_options({"quantile": 0, "k": 4})
    ({'completion_quantile': 0}, {'completion_quantile': 'quantile'}, {'k': 4})
    """
    sim, topo = split_set(items)
    options: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in sim.items():
        name = ALIASES.get(key, key)
        if name in options:
            raise OptionError(f"--set {key}: option {name!r} given twice (also as {spelled[name]!r}); give it once")
        options[name], spelled[name] = value, key
    return options, spelled, topo


def _known_name(key: str) -> str:
    name = ALIASES.get(key, key)
    if name not in OPTION_NAMES:
        raise OptionError(f"unknown simulate option {key!r} (known: {', '.join(_KNOWN)})")
    return name


#: Every option name (the dataclass fields), in declaration order.
OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SimOptions))
#: ``--set`` keys that belong to the simulator (every other ``--set`` key is a topology parameter).
SET_KEYS: frozenset[str] = frozenset(n for n in OPTION_NAMES if n not in _NOT_SET) | frozenset(ALIASES)
_KNOWN = sorted(OPTION_NAMES)


def resolve_options(options: SimOptions | None, algo: str, routing: str, seed: int,
                    kwargs: Mapping[str, Any]) -> SimOptions:
    """The :class:`SimOptions` of one :func:`simulate` call: ``options`` as given, or built from the named
    parameters and keyword options (the compatibility form).

    Raises
    ------
    OptionError
        For a bad option, or options given both as ``options=`` and as keywords.
    """
    if options is None:
        return SimOptions.from_mapping(kwargs, algo=algo, routing=routing, seed=seed)
    if not isinstance(options, SimOptions):
        raise OptionError(f"options={type(options).__name__}: must be a sim.options.SimOptions")
    if kwargs:
        raise OptionError(f"option {sorted(kwargs)[0]!r} given beside options=SimOptions(...); put it in "
                          "the SimOptions")
    for name, value, default in (("algo", algo, "auto"), ("routing", routing, "ecmp"), ("seed", seed, 0)):
        if value != default and value != getattr(options, name):
            raise OptionError(f"{name}={value!r} disagrees with options.{name}={getattr(options, name)!r}; "
                              "give it once")
    return options


__all__ = ["ALGOS", "ALIASES", "MAX_CHANNELS", "MAX_DELAY_US", "MAX_SEED", "MAX_TIME_BINS", "MODELS",
           "OPTION_NAMES", "ROUTINGS", "SET_KEYS", "SimOptions", "TIMINGS", "check_bin_count", "check_seed",
           "resolve_options", "set_options", "split_set"]
