"""Four eager Adam steps (``foreach=True``) over a language model's 149 parameter tensors (185 M fp32 parameters).

Each step (common.AdamSteps) copies that step's gradients into ``.grad`` and calls ``opt.step()``. Eager Adam
first walks the parameters in Python (``_init_group``: each one's gradient and state gathered into lists),
bumps 149 step counters on the host, computes each tensor's bias corrections in Python, then issues its
elementwise ops once per list (``_foreach_lerp_``, ``_foreach_mul_``, ``_foreach_addcmul_``,
``_foreach_sqrt``, ``_foreach_div_``, ``_foreach_add_``, ``_foreach_addcdiv_``): each a few
``multi_tensor_apply`` launches, and each a pass over the tensors it reads and writes, ~19 words per
parameter in all (~3.5 GB per step) against the 7 a single pass needs. Eager Adam is not ``capturable``
(the default): its step counts are host tensors.

Predicted on an H100, from scripts/timing/optimizer_probe.py's step over the same 149 tensors at a quarter of
the size (46 M parameters: 2.1 ms of host work, 23 kernels, 1.27 ms of device passes per step): the passes
grow with the parameters and the host's work does not, so at 185 M the step is device-bound, ~5 ms; with the
reset, the gradients' copies and the update (~4 ms of copies) ~24 ms per call. Work per call: 172 bytes per
parameter (the reset 16, 4 x (the gradients' copy 8 + Adam's 28), the update 12), 31.8 GB.

Timed with the wall clock (timing_mode="cpu"): the host's work is most of the cost.
"""

from chapters.ch14.common import AdamSteps


def get_benchmark() -> AdamSteps:
    return AdamSteps(compiled=False)
