"""Example: your own training job as a sweep workload — an MLP on tensors already in memory.

    perflab sweep run --workload sweeps.examples.mlp_tensors:make --batch-sizes 64,256,1024 --num-workers 0,2

(or ``--workload path/to/mlp_tensors.py:make``). The sweep calls ``make`` once in every trial's own
process with that trial's ``TrialSettings`` (batch size, workers, pinning, AMP, device, seed, ...) and
trains what it returns: build the model, the data and the optimizer, nothing else — the sweep moves the
model to the device, runs and times the steps, and applies AMP, pinning and the rest itself.
``settings.args`` holds the YAML's ``workload_args:`` (here: ``width``).
"""

from __future__ import annotations

import torch
from torch import nn

from sweeps.api import TrialSettings, Workload


def make(settings: TrialSettings) -> Workload:
    n, features, classes = (4096, 32, 10) if settings.smoke else (262_144, 512, 100)
    g = torch.Generator().manual_seed(settings.seed)
    x = torch.randn(n, features, generator=g)
    y = (x @ torch.randn(features, classes, generator=g)).argmax(dim=1)  # a learnable linear teacher
    width = int(settings.args.get("width", 64 if settings.smoke else 2048))
    model = nn.Sequential(
        nn.Linear(features, width), nn.GELU(), nn.Linear(width, width), nn.GELU(), nn.Linear(width, classes)
    )
    return Workload(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=settings.learning_rate),
        loss_fn=nn.CrossEntropyLoss(),
        dataset=torch.utils.data.TensorDataset(x, y),  # the sweep builds the DataLoader with the trial's settings
        name=f"mlp {features}-{width}-{width}-{classes}",
    )
