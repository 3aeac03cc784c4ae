"""The parameters of one cuBLASLt matrix product: the contract between the CUDA backend's
planner (``hlo.backends.cuda.gemm.plan_dot`` fills a ``MatmulParams``) and the runtime's
cuBLASLt binding (``cublaslt.Lt.plan`` reads it). A ``LibraryCall("cublaslt", "matmul")`` step
carries it as ``to_json()`` (the manifest's JSON; ``from_json`` reads it back, with the defaults
below for fields a manifest leaves out). All sizes and strides are in elements; version 1.

- ``m, n, k``: cuBLASLt's problem, D[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C.
- ``batch``: the number of matrices (1: not batched).
- ``trans_a``: op(A) = A^T (A is stored k x m); ``trans_b`` likewise (B stored n x k).
- ``a, b, d`` (``Matrix``): each matrix as stored, column-major (element (r, c) at r + c * ld),
  ``batch_stride`` between matrices. ``c``: (only with a C operand) the same for C; C has D's
  layout; without ``c`` and beta != 0, C is D itself (accumulate in place).
- ``compute``: ``"32F"`` (f16 / bf16 / f32 data), ``"32F_FAST_TF32"`` (f32 with precision
  ``"tf32"``), ``"64F"`` (f64 data). ``scale``: the type of alpha and beta, ``"f32"``, or
  ``"f64"`` for f64 data. ``alpha``, ``beta``: floats.
- ``epilogue``: one of ``EPILOGUES``, applied to alpha*AB+beta*C in that order: + bias (a
  vector of m elements, broadcast over the columns and the batch), then ReLU or GELU (cuBLASLt's
  GELU is the tanh approximation: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))).
- ``bias_dtype``: (with a bias) the bias vector's element type (= D's).
- ``inputs``: the names of the refs before the result, in order: ``("a", "b")`` + ``("c",)`` if
  C + ``("bias",)`` if a bias; the step's refs are those, then D.
- ``swapped``: A is hlo's rhs and B its lhs (D = out^T); informational.

The dtypes: A and B alike, one of f16, bf16, f32, f64; D = A's type, or f32 for f16 / bf16.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

VERSION = 1
EPILOGUES = ("DEFAULT", "RELU", "BIAS", "RELU_BIAS", "GELU", "GELU_BIAS")
BIAS_EPILOGUES = ("BIAS", "RELU_BIAS", "GELU_BIAS")


@dataclass(frozen=True)
class Matrix:
    """One matrix as stored: column-major, ``batch_stride`` elements between a batch's matrices."""
    dtype: str
    rows: int
    cols: int
    ld: int
    batch_stride: int = 0

    def to_json(self) -> Dict[str, Any]:
        return {"dtype": self.dtype, "rows": self.rows, "cols": self.cols, "ld": self.ld,
                "batch_stride": self.batch_stride}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Matrix":
        return cls(str(d["dtype"]), int(d["rows"]), int(d["cols"]), int(d["ld"]),
                   int(d.get("batch_stride", 0) or 0))


@dataclass(frozen=True)
class MatmulParams:
    """One cuBLASLt matmul (the module docstring says what each field means)."""
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    a: Matrix
    b: Matrix
    d: Matrix
    compute: str
    scale: str
    batch: int = 1
    alpha: float = 1.0
    beta: float = 0.0
    epilogue: str = "DEFAULT"
    swapped: bool = False
    c: Optional[Matrix] = None
    bias_dtype: Optional[str] = None
    inputs: Tuple[str, ...] = ("a", "b")
    version: int = VERSION

    @property
    def has_bias(self) -> bool:
        return self.epilogue in BIAS_EPILOGUES

    @property
    def bias_type(self) -> str:
        """The bias vector's element type (D's unless given)."""
        return self.bias_dtype or self.d.dtype

    def to_json(self) -> Dict[str, Any]:
        """The step's ``params`` as a manifest holds them (fields in this order)."""
        out: Dict[str, Any] = {
            "version": self.version, "m": self.m, "n": self.n, "k": self.k, "batch": self.batch,
            "trans_a": self.trans_a, "trans_b": self.trans_b,
            "a": self.a.to_json(), "b": self.b.to_json(), "d": self.d.to_json(),
            "compute": self.compute, "scale": self.scale, "alpha": self.alpha, "beta": self.beta,
            "epilogue": self.epilogue, "swapped": self.swapped,
        }
        if self.c is not None:
            out["c"] = self.c.to_json()
        if self.bias_dtype is not None:
            out["bias_dtype"] = self.bias_dtype
        out["inputs"] = list(self.inputs)
        return out

    @classmethod
    def from_json(cls, p: Dict[str, Any]) -> "MatmulParams":
        """Read a step's ``params``; ``KeyError`` / ``TypeError`` / ``ValueError`` when malformed."""
        return cls(
            m=int(p["m"]), n=int(p["n"]), k=int(p["k"]),
            trans_a=bool(p["trans_a"]), trans_b=bool(p["trans_b"]),
            a=Matrix.from_json(p["a"]), b=Matrix.from_json(p["b"]), d=Matrix.from_json(p["d"]),
            compute=str(p["compute"]), scale=str(p["scale"]), batch=int(p.get("batch", 1)),
            alpha=float(p.get("alpha", 1.0)), beta=float(p.get("beta", 0.0)),
            epilogue=str(p.get("epilogue", "DEFAULT")), swapped=bool(p.get("swapped", False)),
            c=Matrix.from_json(p["c"]) if "c" in p else None,
            bias_dtype=str(p["bias_dtype"]) if "bias_dtype" in p else None,
            inputs=tuple(p.get("inputs", ("a", "b"))), version=int(p.get("version", VERSION)))

    def describe(self) -> str:
        """One line, for errors."""
        return (f"{self.batch}x[{self.m}x{self.k}]{'^T' if self.trans_a else ''} @ "
                f"[{self.k}x{self.n}]{'^T' if self.trans_b else ''} {self.a.dtype}->{self.d.dtype} "
                f"compute {self.compute} epilogue {self.epilogue}")
