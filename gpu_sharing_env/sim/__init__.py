"""The event-driven simulator: a thin :class:`~gpu_sharing_env.sim.engine.Simulator` (the clock
and the event loop) over components that own their state, each declared in its ``__slots__``:

========================  ===============  ===================================================
component                 module           owns
========================  ===============  ===================================================
``JobTable``              ``jobs``         job records, arrivals, status counters
``Queue``                 ``waiting``      the queue, its window, order and decision scope
``Legality``              ``legality``     masks, decision points, why a decision is illegal
``SpeedMemo``             ``speed``        the speed model and its memo tables
``Rates``                 ``rates``        sharing fractions, rates, accrual, CPU factors
``FleetUsage``            ``usage``        per-GPU usage, fleet sums, timeseries,
                                           fragmentation
``OnlineLoad``            ``ticks``        load ticks, SLO accounting, the noise stream
``Monitor``               ``monitor``      SysMonitor states, xCUDA
``Lifecycle``             ``lifecycle``    starts, stops, preemption, eviction, migration
``Faults``                ``failures``     fault events, causes, propagation
========================  ===============  ===================================================

A component changes another's state only through its methods (``tests/test_sim_seam.py``
checks); ``JobState`` (``state``) is the record they share (its docstring: who writes which
field). Also
here: events (``events``), the fault model (``faults``), the online latency model and
SysMonitor's state machine (``online``), observers (``observe``), the scheduler's view
(``view``), the env's action codec (``codec``) and the scenario-to-simulator build (``build``).
"""
