"""The CUDA part of the runtime: the GPU as a target (``target``: kind, triple, architecture,
PTX ISA version)."""
