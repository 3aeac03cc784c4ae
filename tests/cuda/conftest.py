"""The CUDA backend's tests reuse the CPU backend's IR programs (``tests/backends``)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "backends"))
