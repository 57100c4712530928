"""Chapter 13: PyTorch by the profile (AMP, channels_last, fused optimizers, zero_grad, DataLoader, host syncs)."""
