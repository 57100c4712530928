"""Output verification: two variants' outputs compared, tensor by tensor, in the parent or a child of the server.

Verification is norm-wise relative error, ‖out − ref‖₂ / ‖ref‖₂, per output tensor, against a
tolerance chosen by dtype (or ``BenchmarkConfig.rtol``). It never passes by default:

* no output on either side ⇒ not verified;
* a reference that is all zeros or constant ⇒ not verified (it cannot tell right from wrong);
* different shapes, dtypes (dtype drift, INTEGRITY #11) or devices ⇒ mismatch;
* any NaN ⇒ mismatch; ±Inf (a masked logit, a log of 0) must stand at the same places with the same signs on
  both sides, and the finite entries are compared as above (every entry infinite ⇒ not verified).

Generated tokens (``BenchmarkConfig.verify="greedy_tokens"``, ``get_output()`` returning ``[tokens, runner_up,
gap, offsets]``): equal shapes and dtypes, equal offsets, and each request's tokens equal, except that a request
may part from the baseline's at a near-tie: where the *baseline's* gap (top1 - top2 over its logits' standard
deviation) is at most GAP_TOL and the optimized side chose the baseline's runner-up; that request is compared up
to there. More than a quarter of the requests parting is a mismatch, near-ties or not. The optimized side's own
runner-ups and gaps are never read.
"""

from __future__ import annotations

from typing import Any

from bench.define.result import Verification

# Two variants' saved outputs: ((directory, tensor infos) of the reference, (directory, tensor infos) of the other).
FilePair = tuple[tuple[str, list[Any]], tuple[str, list[Any]]]

# How outputs are compared (BenchmarkConfig.verify): tensor by tensor, or generated tokens with near-ties.
MODES = ("exact", "greedy_tokens")
# The largest relative gap (top1 - top2) / std of the baseline's logits at which the optimized side may take the
# runner-up instead. Two fp32 engines that batch differently round the logits ~1e-6..1e-5 of their spread apart
# (chapters/ch15/common.py: ~1e-6 for the smoke model, ~1e-5 for the 12-layer one; on an H200, the same tokens
# decoded in a batch of 16 or alone at most 1.2e-5 apart, in one prefill pass or step by step 1.5e-5, with the
# changed inputs' weights too: scripts/timing/logit_rounding_probe.py, docs/results/h200x2.md), so an argmax can
# flip only where the top two are within ~3e-5; 1e-4 covers it with a 3x margin. A gap that small is rare (the gap is
# below x of the spread about 2.3x of the time: 1 token in ~4,300 at 1e-4), so a wrong engine cannot hide behind
# it: its first wrong token must fall on one of those few, be exactly the runner-up, and do so in at most a
# quarter of the requests.
GAP_TOL = 1e-4
# More than this share of requests parting from the baseline is a mismatch, each at a near-tie or not.
MAX_DIVERGED_SHARE = 0.25
# The layout of a "greedy_tokens" output, per group of four tensors (a variant of several ranks: one per rank).
GREEDY_LAYOUT = (("tokens", "int64"), ("runner_up", "int64"), ("gap", "float32"), ("offsets", "int64"))

# What the error functions say of an output with a NaN or an Inf (compare_tensors then looks closer: _finite_part).
NON_FINITE = "NaN or Inf in the output"
# Norm-wise relative error allowed when baseline and optimized differ only in summation order.
DEFAULT_RTOL: dict[str, float] = {
    "float64": 1e-10,
    "complex128": 1e-10,
    "float32": 1e-5,
    "complex64": 1e-5,
    "float16": 2e-3,
    "bfloat16": 1.6e-2,
    "float8_e4m3fn": 1.3e-1,
    "float8_e5m2": 2.5e-1,
}


def default_rtol(dtype: str) -> float:
    """0.0 (exact) for integer and bool outputs."""
    return DEFAULT_RTOL.get(dtype, 0.0)


def compare_tensors(ref: list[Any], out: list[Any], rtol: float | None, mode: str = "exact") -> Verification:
    """Compare two lists of CPU tensors (baseline = reference), as ``mode`` (BenchmarkConfig.verify) says."""
    if mode not in MODES:
        raise ValueError(f"verify={mode!r} is not one of {', '.join(map(repr, MODES))}")
    layout = _same_layout(ref, out)
    if layout is not None:
        return layout
    if mode == "greedy_tokens":
        return compare_greedy(ref, out)
    worst = 0.0
    used_rtol = 0.0
    for i, (r, o) in enumerate(zip(ref, out, strict=True)):
        name, rd = f"output[{i}]", _dtype(r)
        if r.numel() == 0:
            return Verification(verified=False, detail=f"{name}: empty tensor proves nothing")
        tol = rtol if rtol is not None else default_rtol(rd)
        used_rtol = max(used_rtol, tol)
        err = _error(r, o, name, tol)
        if isinstance(err, Verification) and err.detail == f"{name}: {NON_FINITE}" and r.is_floating_point():
            part = _finite_part(r, o, name, tol)
            if isinstance(part, Verification):
                return part
            err = _error(*part, name, tol)
        if isinstance(err, Verification):
            return err
        worst = max(worst, err)
        if not err <= tol:
            return _mismatch(r, o, name, err, tol, rd)
    return Verification(
        verified=True,
        outcome="match",
        detail=f"{len(ref)} output(s) match: max relative error {worst:.2e} <= rtol {used_rtol:.1e}",
        max_rel_error=worst,
        rtol=used_rtol,
    )


def _error(r: Any, o: Any, name: str, tol: float) -> float | Verification:
    err = _fast_error(r, o, name, tol)
    return _exact_error(r, o, name, tol) if err is None else err


def _finite_part(r: Any, o: Any, name: str, tol: float) -> tuple[Any, Any] | Verification:
    """The finite entries of two real outputs, once their infinities agree (the same places, the same signs); or
    why they cannot be compared: a NaN on a side, infinities that differ, no finite entry."""
    import torch

    r, o = (t.double() if t.dtype != torch.float64 else t for t in (r, o))  # no isnan for float8 tensors
    for side, t in (("baseline", r), ("optimized", o)):
        nan = torch.isnan(t).flatten().nonzero()
        if nan.numel():
            return Verification(verified=False, detail=f"{name}: NaN in the {side}'s output ({nan.numel()} of "
                                f"{t.numel()} entries, the first at flat index {int(nan[0])})", rtol=tol,
                                outcome="mismatch")  # fmt: skip
    r_inf, o_inf = torch.isinf(r), torch.isinf(o)
    apart = ((r_inf | o_inf) & (r != o)).flatten().nonzero()
    if apart.numel():
        return Verification(verified=False, detail=f"{name}: ±Inf at different places or signs ({apart.numel()} of "
                            f"{r.numel()} entries, the first at flat index {int(apart[0])})", rtol=tol,
                            outcome="mismatch")  # fmt: skip
    finite = ~r_inf
    if not bool(finite.any()):
        return Verification(verified=False, detail=f"{name}: every entry is ±Inf; it cannot detect a wrong result")
    return r[finite], o[finite]


def _dtype(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


def _same_layout(ref: list[Any], out: list[Any]) -> Verification | None:
    """Why the two lists cannot be compared entry by entry (count, shape, dtype), or None."""
    if len(ref) != len(out):
        return Verification(
            verified=False, detail=f"baseline returned {len(ref)} outputs, optimized {len(out)}", outcome="mismatch"
        )
    for i, (r, o) in enumerate(zip(ref, out, strict=True)):
        name = f"output[{i}]"
        if tuple(r.shape) != tuple(o.shape):
            return Verification(
                verified=False,
                outcome="mismatch",
                detail=f"{name}: shape, baseline {tuple(r.shape)} vs optimized {tuple(o.shape)}",
            )
        rd, od = _dtype(r), _dtype(o)
        if rd != od:
            return Verification(
                verified=False,
                detail=f"{name}: dtype drift, baseline {rd} vs optimized {od}; if lower precision is the "
                "declared optimization, cast in get_output() and set rtol in get_config()",
                outcome="mismatch",
            )
    return None


def _exact_error(r: Any, o: Any, name: str, tol: float) -> float | Verification:
    """The norm-wise relative error in float64 (complex128), or why none can be computed: NaN or Inf in an
    output, a reference of zeros or a constant one (it cannot tell right from wrong)."""
    import torch

    if r.is_floating_point() or r.is_complex():
        r64, o64 = (
            r.to(torch.complex128 if r.is_complex() else torch.float64),
            o.to(torch.complex128 if o.is_complex() else torch.float64),
        )
        # On the float64 copies: torch has no isfinite for float8 tensors.
        if not bool(torch.isfinite(r64).all()) or not bool(torch.isfinite(o64).all()):
            return Verification(verified=False, detail=f"{name}: {NON_FINITE}", rtol=tol, outcome="mismatch")
    else:
        r64, o64 = r.to(torch.float64), o.to(torch.float64)
    ref_norm = float(torch.linalg.vector_norm(r64))
    if ref_norm == 0.0:
        return Verification(verified=False, detail=f"{name}: reference is all zeros; it cannot detect a wrong result")
    if r.numel() > 1 and bool((r64 == r64.flatten()[0]).all()):
        return Verification(verified=False, detail=f"{name}: reference is constant; it cannot detect a wrong result")
    return float(torch.linalg.vector_norm(o64 - r64)) / ref_norm


def _mismatch(r: Any, o: Any, name: str, err: float, tol: float, dtype: str) -> Verification:
    where = ""
    if not (r.is_floating_point() or r.is_complex()):  # e.g. generated tokens: which entries differ
        diff = (r != o).flatten().nonzero()
        where = f"; {diff.numel()} of {r.numel()} entries differ, the first at flat index {int(diff[0])}"
    return Verification(
        verified=False,
        detail=f"{name}: relative error {err:.3e} exceeds rtol {tol:.1e} ({dtype}){where}",
        max_rel_error=err,
        rtol=tol,
        outcome="mismatch",
    )


def compare_greedy(ref: list[Any], out: list[Any]) -> Verification:
    """Generated tokens with near-ties (the module docstring): ``ref`` and ``out`` of the same count, shapes and
    dtypes, in groups of [tokens, runner_up, gap, offsets] (a variant of several ranks: a group per rank)."""
    bad = _greedy_layout(ref)
    if bad is not None:
        return Verification(verified=False, detail=bad)
    seen = _Seen()
    groups = len(ref) // len(GREEDY_LAYOUT)
    for g in range(groups):
        at = slice(4 * g, 4 * g + 4)
        where = f"output[{4 * g}:{4 * g + 4}] " if groups > 1 else ""
        verdict = _greedy_group(ref[at], out[at], where, seen)
        if verdict is not None:
            return verdict
    parted = len(seen.near)
    if parted > MAX_DIVERGED_SHARE * seen.requests:
        return Verification(
            verified=False,
            outcome="mismatch",
            detail=f"{parted} of {seen.requests} requests part from the baseline's tokens, each at a near-tie (gap "
            f"<= {GAP_TOL:.0e}): more than {MAX_DIVERGED_SHARE:.0%} of the requests is more than rounding explains",
        )
    return Verification(verified=True, outcome="match", detail=seen.describe(), max_rel_error=0.0, rtol=0.0)


def _greedy_layout(ref: list[Any]) -> str | None:
    """Why the baseline's outputs are not [tokens, runner_up, gap, offsets] groups, or None (the other side has
    the same count, shapes and dtypes: ``_same_layout``)."""
    want = ", ".join(f"{name} ({dtype})" for name, dtype in GREEDY_LAYOUT)
    if not ref or len(ref) % len(GREEDY_LAYOUT):
        return f"verify='greedy_tokens' needs get_output() to return [{want}]; got {len(ref)} tensor(s)"
    for g in range(0, len(ref), len(GREEDY_LAYOUT)):
        got = [_dtype(t) for t in ref[g : g + 4]]
        if got != [dtype for _, dtype in GREEDY_LAYOUT]:
            return f"verify='greedy_tokens' needs get_output() to return [{want}]; got dtypes {', '.join(got)}"
        tokens, runner_up, gap, offsets = (t.reshape(-1) for t in ref[g : g + 4])
        n = tokens.numel()
        if n == 0:
            return "verify='greedy_tokens': no tokens; an empty output proves nothing"
        if runner_up.numel() != n or gap.numel() != n:
            return f"verify='greedy_tokens': {n} tokens, {runner_up.numel()} runner-ups, {gap.numel()} gaps"
        steps = offsets[1:] - offsets[:-1]
        if offsets.numel() < 2 or int(offsets[0]) != 0 or int(offsets[-1]) != n or bool((steps < 0).any()):
            return (
                f"verify='greedy_tokens': offsets {offsets[:8].tolist()}... must rise from 0 to the {n} tokens "
                "(request r's tokens at offsets[r]:offsets[r + 1])"
            )
        if n > 1 and bool((tokens == tokens[0]).all()):
            return "reference tokens are all one token; they cannot detect a wrong result"
    return None


class _Seen:
    """What the groups compared so far hold: requests, tokens, the tokens compared, the near-ties accepted."""

    def __init__(self) -> None:
        self.requests = self.tokens = self.compared = 0
        self.near: list[tuple[str, int, int, float]] = []  # (where, request, token, baseline's gap)

    def describe(self) -> str:
        if not self.near:
            return f"tokens equal: {self.tokens:,} tokens of {self.requests} requests"
        compared = f"compared up to there ({self.compared:,} of {self.tokens:,} tokens)"
        if len(self.near) == 1:
            where, r, k, gap = self.near[0]
            return (
                f"tokens equal; 1 of {self.requests} requests diverged at a near-tie (gap {gap:.1e} <= "
                f"{GAP_TOL:.0e}), {where}request {r} at token {k}, and was {compared}"
            )
        parts = ", ".join(f"{where}request {r} at token {k} (gap {gap:.1e})" for where, r, k, gap in self.near)
        return (
            f"tokens equal; {len(self.near)} of {self.requests} requests diverged at near-ties (gap <= "
            f"{GAP_TOL:.0e}): {parts}; each was {compared}"
        )


def _greedy_group(ref: list[Any], out: list[Any], where: str, seen: _Seen) -> Verification | None:
    """One [tokens, runner_up, gap, offsets] group compared (counted into ``seen``); a mismatch, or None."""
    import torch

    tokens, runner_up, gap, offsets = (t.reshape(-1) for t in ref)
    got, got_offsets = out[0].reshape(-1), out[3].reshape(-1)  # the optimized side's runner-ups, gaps unread
    if not torch.equal(offsets, got_offsets):
        i = int((offsets != got_offsets).nonzero()[0])
        return Verification(
            verified=False,
            outcome="mismatch",
            detail=f"{where}request offsets differ: baseline offsets[{i}] = {int(offsets[i])}, optimized "
            f"{int(got_offsets[i])}; both sides lay out the same requests alike",
        )
    n = tokens.numel()
    seen.requests += offsets.numel() - 1
    seen.tokens += n
    seen.compared += n
    differ = (tokens != got).nonzero().reshape(-1)
    if differ.numel() == 0:
        return None
    request = torch.searchsorted(offsets, differ, right=True) - 1
    first = torch.ones_like(request, dtype=torch.bool)
    first[1:] = request[1:] != request[:-1]
    for i, r in zip(differ[first].tolist(), request[first].tolist(), strict=True):
        k, g = i - int(offsets[r]), float(gap[i])
        ours, theirs, second = int(tokens[i]), int(got[i]), int(runner_up[i])
        head = f"{where}request {r} parts from the baseline's tokens at token {k}: baseline {ours}, optimized {theirs}"
        why = None
        if not g <= GAP_TOL:  # NaN too
            why = f"the baseline's top two {g:.1e} of its logits' spread apart, more than a near-tie ({GAP_TOL:.0e})"
        elif theirs != second:
            why = f"a near-tie (gap {g:.1e}), but not to the baseline's runner-up {second}"
        if why is not None:
            total = int(differ.numel())
            return Verification(
                verified=False,
                outcome="mismatch",
                detail=f"{head}, {why}; {total} of {n} tokens differ",
                max_rel_error=None,
                rtol=0.0,
            )
        seen.compared -= int(offsets[r + 1]) - i - 1  # the rest of the request is not compared
        seen.near.append((where, r, k, g))
    return None


# Magnitudes (largest |value| of either tensor) inside which the norms are exact enough in fp32: no
# square overflows (2^80 per element, 2^120 summed over 2^40 elements), and what underflows is
# negligible against a norm of at least 2^-40. Outside, the float64 path.
_FP32_SAFE = (2.0**-40, 2.0**40)


def _fast_error(r: Any, o: Any, name: str, tol: float) -> float | Verification | None:
    """The norm-wise relative error of a real floating output in few passes and no float64 copies.

    One ``aminmax`` per tensor finds NaN/Inf (it propagates NaN; an Inf is an extreme) and a constant
    reference (min == max); the difference and the norms run in float32, which is exact for the
    difference of two fp32 values within 2x of each other (Sterbenz) and ~1e-7 relative otherwise. On
    the 2-core CI machine a 64 Mi-element fp32 pair took 1.16 s the float64 way; the aminmax pass 7 ms
    where two isfinite passes took 0.44 s. None: use the float64 path (float64 outputs, fp8, or
    magnitudes outside _FP32_SAFE)."""
    import torch

    if r.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    r32, o32 = r.float(), o.float()  # no copy for fp32
    (r_min, r_max), (o_min, o_max) = torch.aminmax(r32), torch.aminmax(o32)
    extremes = torch.stack([r_min, r_max, o_min, o_max])
    if not bool(torch.isfinite(extremes).all()):
        return Verification(verified=False, detail=f"{name}: {NON_FINITE}", rtol=tol, outcome="mismatch")
    big = float(extremes.abs().max())
    if big == 0.0 or float(r_min) == float(r_max):  # all zeros, constant
        return None  # the float64 path words the verdict
    if not _FP32_SAFE[0] <= big <= _FP32_SAFE[1]:
        return None
    ref_norm = float(torch.linalg.vector_norm(r32))
    if ref_norm == 0.0:
        return None
    return float(torch.linalg.vector_norm(o32 - r32)) / ref_norm


def verify_all(pairs: list[FilePair], rtol: float | None, mode: str = "exact") -> list[Verification]:
    """``verify_files`` for each (reference, output) pair, stopping at the first that does not verify."""
    out = []
    for ref, got in pairs:
        out.append(verify_files(ref, got, rtol, mode))
        if not out[-1].verified:
            break
    return out


def verify_files(
    ref: tuple[str, list[Any]], out: tuple[str, list[Any]], rtol: float | None, mode: str = "exact"
) -> Verification:
    """Compare two variants' saved outputs, each (directory, tensor infos) as bench.measure.outputs saved them
    (baseline = reference), as ``mode`` says; the files are mapped, not read into fresh memory."""
    from bench.measure import outputs

    return compare_tensors(outputs.load(*ref), outputs.load(*out), rtol, mode)
