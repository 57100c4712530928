"""Chapter 5: storage and input — reading records through a Python loop vs mapped, threaded reads into
page-locked buffers, HDF5 chunks that match the reads, decoding in DataLoader workers, packed shards."""
