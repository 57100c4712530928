"""The tiers' scheduler (``--dist loadgroup``, tests/session.py): pytest-xdist's, with a worker's crash handled so
the session runs on to its end.

A test that takes its process down (a segfault, an abort in a library, ``os._exit``) is reported failed by
pytest-xdist, which starts a new worker. pytest-xdist 3.8's group scheduler then puts the dead worker's whole
workload back on the queue: the units it had finished come back empty (every ungrouped test is a unit of its own),
each is later sent to a worker as no work at all, and at the end of the run the workers wait for a next test that
never comes; the crashed test runs again and may take the new worker down too; and a new worker handed a single
test waits for a second (a worker runs a test once it knows the next one, or is told to stop). The session waits
for ever: CI's limit ends it with nothing reported (pytest-xdist issues 1323, 1327, 1378). Here the crashed test
is not run again (its failure names it), only units with tests left go back, first in the queue, and a worker
holds two tests or the queue is empty.

Order. pytest-xdist hands out the largest groups first by their count of tests; the longest by time are not those:
the team's services (15 tests, ~700 s on one process in CI) and the README's first hour in a fresh clone (5 tests,
~560 s) came after groups of dozens of quick tests. ``FIRST``'s groups go to the processes first, so that no long
group starts late and becomes the session's tail (the longest-first rule of scheduling): the full tier's longest,
then the fast tier's (the groups of 10 s and more on the 2-core host; the ungrouped tests fill in after them).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadGroupScheduling

# The groups handed out first, longest first (tests/session.py names them: ``team``, a file's stem, an
# ``xdist_group`` mark's name); in CI at d4dd713 on one process each: the services ~700 s, the first hour ~560 s,
# a torchrun-style step's set-up 123 s. The fast tier's on the 2-core host (3 processes) at 568c90b: the rounds tests
# ~50 s, the self-check ~20 s, the Inductor compiles ~19 s, the regression suites ~18 s, the exploit catalog ~17 s,
# chapters 18 and 19 ~16 s, ``perflab show``'s store ~14 s, the server's preload ~14 s, chapter 20's search ~12 s
FIRST = (
    "team", "test_first_hour", "test_user_distributed",
    "default_rounds", "test_selfcheck", "inductor", "test_regression", "test_exploits", "test_ch18_kernels",
    "test_ch19_lowp", "test_show", "test_preload", "test_ch20_search",
)  # fmt: skip


class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
    _ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the first assignment: the queue is complete
            self._ordered = True
            for scope in reversed(FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def remove_node(self, node: Any) -> str | None:
        workload: dict[str, dict[str, bool]] = self.assigned_work.pop(node)
        crashed = next((test for unit in workload.values() for test, done in unit.items() if not done), None)
        if crashed is None:
            return None  # a worker that ended with its work done
        for unit in workload.values():
            if crashed in unit:
                unit[crashed] = True
        left = [scope for scope, unit in workload.items() if not all(unit.values())]
        for scope in reversed(left):
            self.workqueue[scope] = workload[scope]
            self.workqueue.move_to_end(scope, last=False)
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed

    def _reschedule(self, node: Any) -> None:
        if node not in self.registered_collections:
            return  # a new worker still collecting: scheduled when it is done (``schedule``)
        super()._reschedule(node)
        while not node.shutting_down and self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
            self._assign_work_unit(node)
