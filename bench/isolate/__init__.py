"""How variants run isolated: each in a fresh process, under stage deadlines, several at a time on workers.

* ``server`` (+ ``warm``): a per-user pre-warmed process (torch, triton and the harness imported, CUDA
  never initialised) that forks each variant's child, kept between commands;
* ``child``: the variant's side: its stages (startup → setup → warmup → measurement → check → batch →
  recheck → teardown), each announced to the parent, its data sent as messages;
* ``runner``: the parent's side of one child: launch (a fork of the server, or ``--cold-start``), the
  watchdog that enforces each stage's limit (TERM, then KILL of the whole process group), the result;
  ``process``: the child's environment, the CUDA guess, killing a process group;
  ``profiled``: profile children, one per tool;
* ``suite`` + ``workers``: a list of examples over one or several workers (one per GPU, or ``--jobs`` on a
  CPU): children started ahead, gates, what may run beside what (the rules are written once, in
  ``workers``); ``sink``: results logged on a thread of their own.

Invariants: a child's fault (exception, crash, hang, timeout) becomes a ``VariantResult`` with its status
and stage, never an exception in the parent; the parent never imports torch (outputs are compared in a
child of the server); nothing outlives the command that started it.

Public (for the packages built on the harness): the names in ``__all__``.
"""

from bench.isolate.process import kill_group

__all__ = ["kill_group"]
