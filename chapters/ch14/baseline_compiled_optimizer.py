"""Four eager Adam steps (``foreach=True``) over a language model's 149 parameter tensors (46 M fp32 parameters).

Each step (common.AdamSteps) copies that step's gradients into ``.grad`` and calls ``opt.step()``. Eager Adam
first walks the parameters in Python (``_init_group``: each one's gradient and state gathered into lists),
bumps 149 step counters on the host, computes each tensor's bias corrections in Python, then issues its
elementwise ops once per list (``_foreach_lerp_``, ``_foreach_mul_``, ``_foreach_addcmul_``,
``_foreach_sqrt``, ``_foreach_div_``, ``_foreach_add_``, ``_foreach_addcdiv_``): each a few
``multi_tensor_apply`` launches, and each a pass over the tensors it reads and writes, ~19 words per
parameter in all (~3.5 GB per step) against the 7 a single pass needs. Eager Adam is not ``capturable``
(the default): its step counts are host tensors.

Predicted on an H100: the host's per-tensor work dominates (chapter 13 measured foreach AdamW over the same
149 tensors at ~5 ms per step more than the fused kernel on its host) over ~1.4 ms of device passes:
~4-5 ms per step, ~16-20 ms per call with the gradients' copies and the reset. Work per call: 172 bytes per
parameter (the reset 16, 4 x (the gradients' copy 8 + Adam's 28), the update 12), 8.0 GB.

Timed with the wall clock (timing_mode="cpu"): the host's work is most of the cost.
"""

from chapters.ch14.common import AdamSteps


def get_benchmark() -> AdamSteps:
    return AdamSteps(compiled=False)
