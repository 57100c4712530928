"""What a benchmark is: the protocol, its configuration, the context it runs in, and discovery of the files."""
