"""Chapter 11: streams (copy/compute overlap, both copy directions at once, concurrent kernels, events)."""
