"""Chapter 10: pipelining — software pipelining of a matmul's K loop (num_stages), Hopper TMA through
tensor descriptors, persistent kernels, double-buffered host-to-device copies on two streams."""
