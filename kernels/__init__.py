"""Kernel cases: our Triton kernels (forward and backward) against naive PyTorch and torch.compile."""
