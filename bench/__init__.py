"""The seed workloads measured side by side: numpy, jax.jit, torch eager, torch.compile, IREE and
hlo's targets (issue 4). Entry: ``python -m bench`` (see bench/README.md)."""
