"""hlo: a whole-program ahead-of-time compiler for array programs."""
__version__ = "0.1.0"
