"""How far apart the served model's fp32 logits come out when the same tokens pass in different batch shapes: the
rounding that a greedy-token comparison (bench.measure.verify, verify="greedy_tokens") must take for a near-tie.

The model of chapters 15-17 (``--preset``, weights from ``--seed``), ``--requests`` seeded prompts of
``--prompt`` tokens (a range), each prefilled alone, then ``--new`` tokens decoded greedily request by request (the
reference tokens). The same tokens are then fed (teacher-forced) two other ways:

* ``batched``: every request's decode step in one batch of all requests (rows of one contiguous cache), as a
  continuous-batching engine runs them;
* ``one pass``: each request's prompt and generated tokens in one prefill pass, the logits of every generated
  position at once, as a speculative verifier or chunked prefill computes them.

Per decode position: |logits - reference logits| max over the vocabulary, relative to the reference row's standard
deviation (the unit of ``gap`` in models.gpt.greedy_top2); and the reference's own top-two gap. Printed: those
differences' median, p99 and max, and how many reference gaps lie below the largest difference (argmax flips that
rounding alone can cause). ``--perturb`` first changes the weights as the harness's changed-inputs check does
(bench.measure.guard.perturb).

    python3 scripts/timing/logit_rounding_probe.py                      # CUDA if present
    python3 scripts/timing/logit_rounding_probe.py --preset smoke --device cpu --requests 4 --new 16 --prompt 32 64
"""

from __future__ import annotations

import argparse

import torch

from bench.measure.guard import perturb
from models import GPT, ContiguousCache, Segment, preset


def _rel(diff_max: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    return diff_max / ref.std(dim=-1).clamp_min(1e-30)


def probe(model: GPT, prompts: list[torch.Tensor], new: int) -> dict[str, torch.Tensor]:
    dev = prompts[0].device
    n, longest = len(prompts), max(p.numel() for p in prompts) + new
    zero = torch.zeros(1, dtype=torch.int64, device=dev)
    ref_logits, ref_tokens = [], []
    for p in prompts:  # each request alone: prefill, then greedy decode steps of one row
        cache = ContiguousCache(model.cfg, 1, longest, dev)
        rows = [model([Segment(p[None], zero, p.numel())], cache)[0]]
        toks = [int(rows[-1].argmax())]
        for i in range(new - 1):
            tok = torch.tensor([[toks[-1]]], device=dev)
            rows.append(model([Segment(tok, zero + p.numel() + i, p.numel() + i + 1)], cache)[0])
            toks.append(int(rows[-1].argmax()))
        ref_logits.append(torch.stack(rows))  # [new, V]
        ref_tokens.append(toks)
    ref = torch.stack(ref_logits)  # [n, new, V]
    top2 = ref.topk(2, dim=-1).values
    gap = (top2[..., 0] - top2[..., 1]) / ref.std(dim=-1)

    cache = ContiguousCache(model.cfg, n, longest, dev)  # batched: prefill row by row, decode all rows at once
    first = []
    for r, p in enumerate(prompts):
        rows_t = torch.tensor([r], device=dev)
        first.append(model([Segment(p[None], zero, p.numel(), rows=rows_t)], cache)[0])
    batched = [torch.stack(first)]
    lens = torch.tensor([p.numel() for p in prompts], device=dev)
    for i in range(new - 1):
        tok = torch.tensor([[t[i]] for t in ref_tokens], device=dev)
        batched.append(model([Segment(tok, lens + i, int(lens.max()) + i + 1)], cache))
    bat = torch.stack(batched, dim=1)  # [n, new, V]

    once = []
    for p, toks in zip(prompts, ref_tokens, strict=True):  # one pass over prompt + generated, every position's logits
        seq = torch.cat([p, torch.tensor(toks[:-1], device=dev)])[None]
        cols = torch.arange(p.numel() - 1, seq.shape[1], device=dev)[None]
        once.append(model([Segment(seq, zero, seq.shape[1], last=cols)], None).reshape(new, -1))
    one = torch.stack(once)
    return {
        "gap": gap.flatten(),
        "batched": _rel((bat - ref).abs().amax(dim=-1), ref).flatten(),
        "one pass": _rel((one - ref).abs().amax(dim=-1), ref).flatten(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--prompt", type=int, nargs=2, default=(1024, 1900), metavar=("LO", "HI"))
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"device {name}; torch {torch.__version__}; preset {args.preset}; {args.requests} requests, prompts "
          f"{args.prompt[0]}-{args.prompt[1]} tokens, {args.new} new")  # fmt: skip
    print("| weights | feed | positions | diff median | diff p99 | diff max | ref gaps below max diff | min ref gap |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for changed in (False, True):
        model = GPT.from_seed(preset(args.preset), args.seed, dev)
        if changed:
            tensors = {k: v for k, v in model.state_dict().items()}
            tensors.update({"cos": model.cos, "sin": model.sin})
            perturb({k: v for k, v in tensors.items() if v is not None})
        gen = torch.Generator().manual_seed(args.seed)
        lengths = torch.randint(args.prompt[0], args.prompt[1] + 1, (args.requests,), generator=gen).tolist()
        prompts = [torch.randint(0, model.cfg.vocab_size, (n,), generator=gen).to(dev) for n in lengths]
        with torch.no_grad():
            res = probe(model, prompts, args.new)
        gap = res["gap"].double().cpu()
        for feed in ("batched", "one pass"):
            d = res[feed].double().cpu()
            top = float(d.max())
            cells = [d.numel(), f"{float(d.median()):.2e}", f"{float(d.quantile(0.99)):.2e}", f"{top:.2e}",
                     int((gap < top).sum()), f"{float(gap.min()):.2e}"]  # fmt: skip
            print(f"| {'perturbed' if changed else 'seeded'} | {feed} | " + " | ".join(map(str, cells)) + " |")


if __name__ == "__main__":
    main()
