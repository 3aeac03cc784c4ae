"""StableHLO ops that hlo expresses with ops of its table, built in place by the importer.

``triangular_solve(b, a, rhs, left_side, lower, unit_diagonal, transpose_a)``: the solution X
of ``op(a) X = rhs`` (``left_side``) or ``X op(a) = rhs``, ``op`` one of NO_TRANSPOSE,
TRANSPOSE, ADJOINT; only ``a``'s ``lower`` (or upper) triangle is read, and with
``unit_diagonal`` not its diagonal either. Every case becomes one lower-triangular left-side
system ``L Y = C`` (transposing for the right side and for op, reversing rows and columns for
an upper triangle), solved by forward substitution in a ``while`` loop, one row per step:
``Y[i] = (C[i] - S[i] Y) / L[i, i]`` with S the strictly lower part (Y's unsolved rows are
still zero). Each row is a dot of the row with Y in the element type, as XLA's expander does
(``xla/service/triangular_solve_expander.cc`` solves blocks; at these sizes: one row), so every
target runs it with the ops it already has, and autodiff, batching and export need nothing new.
"""
from __future__ import annotations

import numpy as np

from .builder import Builder
from .core import Region, Value
from .types import TensorType, element_type, s32

TRANSPOSE_KINDS = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def _const(b: Builder, value, et) -> Value:
    return b.value("constant", [], attrs={"value": np.array(value, dtype=et.np_dtype)})


def _swap_last(b: Builder, x: Value) -> Value:
    r = x.type.rank
    perm = tuple(range(r - 2)) + (r - 1, r - 2)
    return b.value("transpose", [x], attrs={"permutation": perm})


def _reverse_last(b: Builder, x: Value, dims) -> Value:
    r = x.type.rank
    return b.value("reverse", [x], attrs={"dimensions": tuple(r - 2 + d for d in dims)})


def _mask(b: Builder, t: TensorType, keep) -> Value:
    """A pred tensor of ``t``'s shape: ``keep(row, col)`` per element of the last two dims."""
    r = t.rank
    it = TensorType(t.shape, s32)
    rows = b.value("iota", [], attrs={"iota_dimension": r - 2}, result_types=[it])
    cols = b.value("iota", [], attrs={"iota_dimension": r - 1}, result_types=[it])
    return b.value("compare", [rows, cols], attrs={"comparison_direction": keep})


def _conj(b: Builder, x: Value) -> Value:
    re_ = b.value("real", [x])
    im = b.value("negate", [b.value("imag", [x])])
    return b.value("complex", [re_, im])


def _bcast_scalar(b: Builder, v: Value, t: TensorType) -> Value:
    return b.value("broadcast_in_dim", [v], attrs={"broadcast_dimensions": ()}, result_types=[t])


def triangular_solve(b: Builder, a: Value, rhs: Value, left_side: bool, lower: bool,
                     unit_diagonal: bool, transpose_a: str) -> Value:
    if transpose_a not in TRANSPOSE_KINDS:
        raise ValueError(f"transpose_a must be one of {', '.join(TRANSPOSE_KINDS)}, got {transpose_a!r}")
    at = a.type
    et = at.dtype
    zero = _bcast_scalar(b, _const(b, 0, et), at.without_layout())
    # keep the triangle that is read (with the diagonal, or ones on it)
    tri = b.value("select", [_mask(b, at, "GE" if lower else "LE"), a, zero])
    if unit_diagonal:
        one = _bcast_scalar(b, _const(b, 1, et), at.without_layout())
        tri = b.value("select", [_mask(b, at, "EQ"), one, tri])
    x, c = tri, rhs
    if transpose_a != "NO_TRANSPOSE":
        x = _swap_last(b, x)
        if transpose_a == "ADJOINT" and et.is_complex:
            x = _conj(b, x)
        lower = not lower
    if not left_side:  # Y op(a) = C  <=>  op(a)^T Y^T = C^T
        x, c = _swap_last(b, x), _swap_last(b, c)
        lower = not lower
    if not lower:  # reverse the unknowns' order: an upper system becomes a lower one
        x, c = _reverse_last(b, x, (0, 1)), _reverse_last(b, c, (0,))
    y = _forward_substitution(b, x, c, unit_diagonal)
    if not lower:
        y = _reverse_last(b, y, (0,))
    if not left_side:
        y = _swap_last(b, y)
    return y


def _forward_substitution(b: Builder, L: Value, C: Value, unit: bool) -> Value:
    lt, ct = L.type.without_layout(), C.type.without_layout()
    r = lt.rank
    n, k = lt.shape[-1], ct.shape[-1]
    et = lt.dtype
    batch = lt.shape[:-2]
    zero_l = _bcast_scalar(b, _const(b, 0, et), lt)
    strict = b.value("select", [_mask(b, lt, "GT"), L, zero_l])
    y0 = _bcast_scalar(b, _const(b, 0, et), ct)
    i0 = _const(b, 0, s32)
    carry = [TensorType((), s32), ct]

    cond = Region(carry, name="cond")
    cb = Builder(cond, b.loc)
    nval = _const(cb, n, s32)
    cond.outputs = [cb.value("compare", [cond.args[0], nval], attrs={"comparison_direction": "LT"})]

    body = Region(carry, name="body")
    bb = Builder(body, b.loc)
    i, y = body.args
    z = _const(bb, 0, s32)
    starts = [z] * (r - 2)
    row = bb.value("dynamic_slice", [strict] + starts + [i, z],
                   attrs={"slice_sizes": tuple(batch) + (1, n)})
    nb = len(batch)
    dims = {"lhs_contracting_dimensions": (r - 1,), "rhs_contracting_dimensions": (r - 2,)}
    if nb:  # (attributes at their defaults are left out, as the importer leaves them out)
        dims.update(lhs_batching_dimensions=tuple(range(nb)), rhs_batching_dimensions=tuple(range(nb)))
    s = bb.value("dot_general", [row, y], attrs=dims, result_types=[TensorType(tuple(batch) + (1, k), et)])
    ci = bb.value("dynamic_slice", [C] + starts + [i, z], attrs={"slice_sizes": tuple(batch) + (1, k)})
    yi = bb.value("subtract", [ci, s])
    if not unit:
        d = bb.value("dynamic_slice", [L] + starts + [i, i], attrs={"slice_sizes": tuple(batch) + (1, 1)})
        d = bb.value("broadcast_in_dim", [d], attrs={"broadcast_dimensions": tuple(range(r))},
                     result_types=[TensorType(tuple(batch) + (1, k), et)])
        yi = bb.value("divide", [yi, d])
    y2 = bb.value("dynamic_update_slice", [y, yi] + starts + [i, z])
    body.outputs = [bb.value("add", [i, _const(bb, 1, s32)]), y2]

    w = b.op("while", [i0, y0], regions=[cond, body])
    return w.results[1]


# --------------------------------------------------------------------------------------------
# fft
# --------------------------------------------------------------------------------------------

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
DFT_MAX = 64  # lengths up to this (not powers of two) multiply by the DFT matrix


def fft_result_type(x: TensorType, fft_type: str, lengths) -> TensorType:
    """The result type of StableHLO's fft (and the checks of its operand), or ValueError."""
    lengths = tuple(int(n) for n in lengths)
    k = len(lengths)
    if fft_type not in FFT_TYPES:
        raise ValueError(f"fft_type must be one of {', '.join(FFT_TYPES)}, got {fft_type!r}")
    if not 1 <= k <= 3 or x.rank < k:
        raise ValueError(f"fft_length {list(lengths)} needs 1 to 3 entries, at most the operand's rank {x.rank}")
    et = x.dtype
    if fft_type == "RFFT":
        if et.name not in ("f32", "f64"):
            raise ValueError(f"RFFT takes f32 or f64, got {et}")
        if x.shape[-k:] != lengths:
            raise ValueError(f"RFFT: the operand's last dimensions {list(x.shape[-k:])} must be fft_length {list(lengths)}")
        return TensorType(x.shape[:-1] + (lengths[-1] // 2 + 1,), element_type("c64" if et.name == "f32" else "c128"))
    if not et.is_complex:
        raise ValueError(f"{fft_type} takes c64 or c128, got {et}")
    if fft_type == "IRFFT":
        want = lengths[:-1] + (lengths[-1] // 2 + 1,)
        if x.shape[-k:] != want:
            raise ValueError(f"IRFFT: the operand's last dimensions {list(x.shape[-k:])} must be {list(want)}")
        return TensorType(x.shape[:-1] + (lengths[-1],), et.component)
    if x.shape[-k:] != lengths:
        raise ValueError(f"{fft_type}: the operand's last dimensions {list(x.shape[-k:])} must be fft_length {list(lengths)}")
    return x.without_layout()


def fft(b: Builder, x: Value, fft_type: str, lengths) -> Value:
    """StableHLO's fft over the last ``len(lengths)`` dimensions (numpy's fftn, ifftn with
    1/N, rfftn, irfftn), with hlo's ops: a 1-D transform per dimension (moved last, then
    back); powers of two by radix-2 decimation in frequency (log2 n stages of add, subtract
    and twiddle multiply over the whole array, then one transpose undoing the bit reversal),
    lengths up to DFT_MAX by the DFT matrix, other lengths by Bluestein's chirp z-transform
    over a power-of-two FFT. Twiddles and chirps are computed in float64 and rounded once."""
    lengths = tuple(int(n) for n in lengths)
    rt = fft_result_type(x.type, fft_type, lengths)
    k = len(lengths)
    r = x.type.rank
    axes = list(range(r - k, r))
    if fft_type in ("FFT", "IFFT"):
        y = x
        for ax in axes:
            y = _fft_axis(b, y, ax, fft_type == "IFFT")
        return y
    if fft_type == "RFFT":
        y = b.value("convert", [x], result_types=[TensorType(x.type.shape, rt.dtype)])
        for ax in axes:
            y = _fft_axis(b, y, ax, False)
        h = lengths[-1] // 2 + 1
        return _slice_last(b, y, 0, h)
    # IRFFT: inverse transforms over the leading axes, then the Hermitian extension of the
    # last one and its inverse transform; the real part is the result
    y = x
    for ax in axes[:-1]:
        y = _fft_axis(b, y, ax, True)
    n = lengths[-1]
    h = n // 2 + 1
    if n - h > 0:
        tail = _conj(b, b.value("reverse", [_slice_last(b, y, 1, n - h + 1)], attrs={"dimensions": (r - 1,)}))
        y = b.value("concatenate", [_slice_last(b, y, 0, h), tail], attrs={"dimension": r - 1})
    else:
        y = _slice_last(b, y, 0, n)
    y = _fft_axis(b, y, r - 1, True)
    return b.value("real", [y])


def _slice_last(b: Builder, x: Value, lo: int, hi: int) -> Value:
    r = x.type.rank
    return b.value("slice", [x], attrs={"start_indices": (0,) * (r - 1) + (lo,),
                                        "limit_indices": x.type.shape[:-1] + (hi,)})


def _complex_const(b: Builder, z: np.ndarray, et) -> Value:
    return b.value("constant", [], attrs={"value": np.ascontiguousarray(z.astype(et.np_dtype))})


def _fft_axis(b: Builder, x: Value, axis: int, inverse: bool) -> Value:
    """The 1-D transform of ``x`` along ``axis`` (the inverse with 1/n)."""
    r = x.type.rank
    n = x.type.shape[axis]
    if n <= 1 or x.type.size == 0:
        return x
    if axis != r - 1:
        perm = tuple(d for d in range(r) if d != axis) + (axis,)
        y = _fft_last(b, b.value("transpose", [x], attrs={"permutation": perm}), inverse)
        back = tuple(int(i) for i in np.argsort(perm))
        return b.value("transpose", [y], attrs={"permutation": back})
    return _fft_last(b, x, inverse)


def _fft_last(b: Builder, x: Value, inverse: bool) -> Value:
    n = x.type.shape[-1]
    if n & (n - 1) == 0:
        y = _radix2(b, x, inverse)
    elif n <= DFT_MAX:
        y = _dft(b, x, inverse)
    else:
        y = _bluestein(b, x, inverse)
    if inverse:
        y = b.value("multiply", [y, _bcast_scalar(b, _const(b, 1.0 / n, x.type.dtype), y.type)])
    return y


def _dft(b: Builder, x: Value, inverse: bool) -> Value:
    t = x.type
    n = t.shape[-1]
    j = np.arange(n)
    sign = 1.0 if inverse else -1.0
    w = np.exp(sign * 2j * np.pi * ((np.outer(j, j) % n) / n))
    wc = _complex_const(b, w, t.dtype)
    return b.value("dot_general", [x, wc], attrs={"lhs_contracting_dimensions": (t.rank - 1,),
                                                  "rhs_contracting_dimensions": (0,)})


def _radix2(b: Builder, x: Value, inverse: bool) -> Value:
    t = x.type
    batch = t.shape[:-1]
    n = t.shape[-1]
    nb = len(batch)
    et = t.dtype
    sign = 1.0 if inverse else -1.0
    g, length = 1, n
    y = b.value("reshape", [x], result_types=[TensorType(batch + (1, n), et)])
    while length > 1:
        half = length // 2
        shape = batch + (g, length)
        lo = b.value("slice", [y], attrs={"start_indices": (0,) * (nb + 2), "limit_indices": batch + (g, half)})
        hi = b.value("slice", [y], attrs={"start_indices": (0,) * (nb + 1) + (half,), "limit_indices": shape})
        s = b.value("add", [lo, hi])
        d = b.value("subtract", [lo, hi])
        if half > 1:
            w = _complex_const(b, np.exp(sign * 2j * np.pi * np.arange(half) / length), et)
            w = b.value("broadcast_in_dim", [w], attrs={"broadcast_dimensions": (nb + 1,)},
                        result_types=[d.type.without_layout()])
            d = b.value("multiply", [d, w])
        pair = TensorType(batch + (g, 1, half), et)
        s = b.value("reshape", [s], result_types=[pair])
        d = b.value("reshape", [d], result_types=[pair])
        y = b.value("concatenate", [s, d], attrs={"dimension": nb + 1})
        g, length = 2 * g, half
        y = b.value("reshape", [y], result_types=[TensorType(batch + (g, length), et)])
        y = _stage_end(b, y)
    bits = n.bit_length() - 1
    if bits > 1:  # output k sits at the bit reversal of k
        y = b.value("reshape", [y], result_types=[TensorType(batch + (2,) * bits, et)])
        perm = tuple(range(nb)) + tuple(range(nb + bits - 1, nb - 1, -1))
        y = b.value("transpose", [y], attrs={"permutation": perm})
    return b.value("reshape", [y], result_types=[TensorType(batch + (n,), et)])


def _stage_end(b: Builder, y: Value) -> Value:
    """Each stage reads two elements of the previous one per element: computed inside one
    fused loop, stage s would recompute 2^s elements of the input per output. A barrier
    makes every stage a kernel of its own (one pass over the array)."""
    return b.op("optimization_barrier", [y]).results[0]


def _bluestein(b: Builder, x: Value, inverse: bool) -> Value:
    """X[k] = c*[k] sum_j (x[j] c*[j]) c[k - j], c[j] = exp(i pi j^2 / n) (conjugated for
    the inverse): a convolution computed with power-of-two FFTs of length m >= 2n - 1."""
    t = x.type
    batch = t.shape[:-1]
    nb = len(batch)
    n = t.shape[-1]
    et = t.dtype
    m = 1 << (2 * n - 2).bit_length()
    j = np.arange(n)
    sign = 1.0 if inverse else -1.0
    chirp = np.exp(sign * 1j * np.pi * ((j * j) % (2 * n)) / n)  # c* (forward)
    kernel = np.zeros(m, np.complex128)
    kernel[:n] = np.conj(chirp)
    kernel[m - n + 1:] = np.conj(chirp[1:][::-1])
    kernel_f = np.fft.fft(kernel)

    def bcast(c):
        return b.value("broadcast_in_dim", [_complex_const(b, c, et)],
                       attrs={"broadcast_dimensions": (nb,)},
                       result_types=[TensorType(batch + (c.shape[0],), et)])

    a = b.value("multiply", [x, bcast(chirp)])
    zero = _const(b, 0, et)
    a = b.value("pad", [a, zero], attrs={"edge_padding_low": (0,) * (nb + 1),
                                         "edge_padding_high": (0,) * nb + (m - n,),
                                         "interior_padding": (0,) * (nb + 1)})
    fa = _radix2(b, a, False)
    prod = b.value("multiply", [fa, bcast(kernel_f)])
    conv = _radix2(b, prod, True)
    conv = b.value("multiply", [_slice_last(b, conv, 0, n), bcast(chirp / m)])
    return conv


# --------------------------------------------------------------------------------------------
# rng_bit_generator
# --------------------------------------------------------------------------------------------

_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


def rng_bit_generator(b: Builder, state: Value, algorithm: str, output: TensorType):
    """(new state, random bits of type ``output``), bit-exact with XLA's expansion
    (``xla/service/rng_bit_generator_expander.cc`` over ``xla/hlo/builder/lib/prng.cc``).

    ``THREE_FRY``: Threefry-2x32 with 20 rounds; state = [key, counter] as u64, each 64-bit
    output word from counter + its row-major index; 32-bit outputs split one dimension in
    halves; new counter = counter + the words used.
    ``PHILOX`` (and ``DEFAULT``, which XLA's CPU and GPU compilers expand as PHILOX): Philox-4x32
    with 10 rounds; state = [key, counter] with the 128-bit counter (high, low) = (key, counter)
    for a u64[2] state, or [key, low, high] for a u64[3] one; block i (counter + i) gives 4
    consecutive 32-bit words (64-bit outputs: 2 words, low first); new counter = counter + the
    blocks used, and a u64[2] state keeps only its low half.
    Both: 8/16-bit outputs truncate 32-bit words; signed and float outputs are the unsigned bits
    reinterpreted. Anything else raises ValueError."""
    if algorithm not in ("THREE_FRY", "PHILOX", "DEFAULT"):
        raise ValueError(f"algorithm {algorithm} is not implemented")
    philox = algorithm != "THREE_FRY"
    st = state.type
    sizes = (2, 3) if philox else (2,)
    if st.rank != 1 or st.shape[0] not in sizes or st.dtype.name != "u64":
        want = " or ".join(f"u64[{n}]" for n in sizes)
        raise ValueError(f"{algorithm} takes a {want} state, got {st}")
    et = output.dtype
    if et.is_pred or et.is_complex or et.bits not in (8, 16, 32, 64):
        raise ValueError(f"random bits of {et} are not implemented")
    key = _scalar_at(b, state, 0)
    if philox:
        bits, new_state = _philox(b, state, key, output.shape, et.bits == 64)
    else:
        bits, new_state = _threefry(b, key, _scalar_at(b, state, 1), output.shape, et.bits == 64)
    if et.bits < 32:
        bits = b.value("convert", [bits], result_types=[TensorType(output.shape, element_type(f"u{et.bits}"))])
    if et != element_type(f"u{et.bits}"):
        bits = b.value("bitcast_convert", [bits], result_types=[TensorType(output.shape, et)])
    return b.value("concatenate", [_vector(b, key)] + new_state, attrs={"dimension": 0}), bits


def _vector(b: Builder, scalar: Value) -> Value:
    return b.value("reshape", [scalar], result_types=[TensorType((1,), scalar.type.dtype)])


def _u64_of_u32s(b: Builder, lo: Value, hi: Value) -> Value:
    t = TensorType(lo.type.shape, element_type("u64"))
    lo, hi = (b.value("convert", [w], result_types=[t]) for w in (lo, hi))
    return b.value("or", [lo, b.value("shift_left", [hi, _full(b, 32, t)])])


def _u32s_of_u64(b: Builder, v: Value):
    t = TensorType(v.type.shape, element_type("u32"))
    lo = b.value("convert", [v], result_types=[t])
    hi = b.value("convert", [b.value("shift_right_logical", [v, _full(b, 32, v.type)])], result_types=[t])
    return lo, hi


def _threefry(b: Builder, key: Value, ctr: Value, shape, wide: bool):
    """THREE_FRY's bits (u64 when ``wide``, else u32) and its new state's tail ([counter])."""
    if wide:
        words, used = _threefry_words(b, key, ctr, shape)
        bits = _u64_of_u32s(b, *words)
    else:
        bits, used = _threefry_u32(b, key, ctr, shape)
    return bits, [_vector(b, b.value("add", [ctr, _const(b, used, element_type("u64"))]))]


def _scalar_at(b: Builder, v: Value, i: int) -> Value:
    s = b.value("slice", [v], attrs={"start_indices": (i,), "limit_indices": (i + 1,)})
    return b.value("reshape", [s], result_types=[TensorType((), v.type.dtype)])


def _full(b: Builder, value, t: TensorType) -> Value:
    return _bcast_scalar(b, _const(b, value, t.dtype), t)


def _threefry_u32(b: Builder, key: Value, ctr: Value, shape):
    """32-bit words of ``shape``: one dimension (the first even one, else the largest) is split
    into halves whose words are the two outputs of one Threefry block."""
    u32 = element_type("u32")
    if not shape:  # one block; its first word
        words, used = _threefry_words(b, key, ctr, (1,))
        return b.value("reshape", [words[0]], result_types=[TensorType((), u32)]), used
    split = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = (shape[split] + 1) // 2
    hshape = tuple(shape[:split]) + (half, 1) + tuple(shape[split + 1:])
    words, used = _threefry_words(b, key, ctr, hshape)
    cat = b.value("concatenate", list(words), attrs={"dimension": split + 1})
    full = tuple(shape[:split]) + (2 * half,) + tuple(shape[split + 1:])
    out = b.value("reshape", [cat], result_types=[TensorType(full, u32)])
    if 2 * half != shape[split]:
        out = b.value("slice", [out], attrs={"start_indices": (0,) * len(shape), "limit_indices": tuple(shape)})
    return out, used


def _threefry_words(b: Builder, key: Value, ctr: Value, shape):
    """Threefry-2x32 of (counter + row-major index) for every index of ``shape``: two u32
    tensors of ``shape`` and the number of counters used."""
    u64, u32 = element_type("u64"), element_type("u32")
    t64, t32 = TensorType(shape, u64), TensorType(shape, u32)
    n = int(np.prod(shape, dtype=np.int64))
    x = _bcast_scalar(b, ctr, t64)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] >= 2:
            it = b.value("iota", [], attrs={"iota_dimension": d}, result_types=[t64])
            x = b.value("add", [x, b.value("multiply", [it, _full(b, stride, t64)])])
            stride *= shape[d]

    x0, x1 = _u32s_of_u64(b, x)
    k0, k1 = _u32s_of_u64(b, key)
    k2 = b.value("xor", [b.value("xor", [k0, k1]), _const(b, 0x1BD11BDA, u32)])
    ks = [_bcast_scalar(b, k, t32) for k in (k0, k1, k2)]

    def add(p, q):
        return b.value("add", [p, q])

    def rnd(v0, v1, r):
        v0 = add(v0, v1)
        rot = b.value("or", [b.value("shift_left", [v1, _full(b, r, t32)]),
                             b.value("shift_right_logical", [v1, _full(b, 32 - r, t32)])])
        return v0, b.value("xor", [v0, rot])

    x0, x1 = add(x0, ks[0]), add(x1, ks[1])
    for i in range(5):
        rots = _ROTATIONS[:4] if i % 2 == 0 else _ROTATIONS[4:]
        for r in rots:
            x0, x1 = rnd(x0, x1, r)
        x0 = add(x0, ks[(i + 1) % 3])
        x1 = add(add(x1, ks[(i + 2) % 3]), _full(b, i + 1, t32))
    return (x0, x1), n


_PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # key increments per round
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # round multipliers


def _philox(b: Builder, state: Value, key: Value, shape, wide: bool):
    """PHILOX's bits (u64 when ``wide``, else u32) and its new state's tail."""
    u64, u32 = element_type("u64"), element_type("u32")
    n = int(np.prod(shape, dtype=np.int64))
    words = 2 * n if wide else n
    blocks = -(-words // 4)
    if state.type.shape[0] == 3:
        lo, hi = _scalar_at(b, state, 1), _scalar_at(b, state, 2)
    else:
        lo, hi = _scalar_at(b, state, 1), key
    t = TensorType((blocks,), u64)
    c_lo, c_hi = _u128_add(b, lo, hi, b.value("iota", [], attrs={"iota_dimension": 0}, result_types=[t]))
    x = [*_u32s_of_u64(b, c_lo), *_u32s_of_u64(b, c_hi)]
    k = list(_u32s_of_u64(b, key))
    t32 = TensorType((blocks,), u32)
    for _ in range(10):
        hi0, lo0 = _mul_hi_lo(b, x[0], _PHILOX_M[0])
        hi1, lo1 = _mul_hi_lo(b, x[2], _PHILOX_M[1])
        kb = [_bcast_scalar(b, kk, t32) for kk in k]
        x = [b.value("xor", [b.value("xor", [hi1, x[1]]), kb[0]]), lo1,
             b.value("xor", [b.value("xor", [hi0, x[3]]), kb[1]]), lo0]
        k = [b.value("add", [kk, _const(b, w, u32)]) for kk, w in zip(k, _PHILOX_W)]
    if wide:
        x = [_u64_of_u32s(b, x[0], x[1]), _u64_of_u32s(b, x[2], x[3])]
    per = len(x)
    et = x[0].type.dtype
    cols = [b.value("reshape", [w], result_types=[TensorType((blocks, 1), et)]) for w in x]
    flat = b.value("reshape", [b.value("concatenate", cols, attrs={"dimension": 1})],
                   result_types=[TensorType((blocks * per,), et)])
    if blocks * per != n:
        flat = b.value("slice", [flat], attrs={"start_indices": (0,), "limit_indices": (n,)})
    bits = b.value("reshape", [flat], result_types=[TensorType(tuple(shape), et)])
    new_lo, new_hi = _u128_add(b, lo, hi, _const(b, blocks, u64))
    tail = [_vector(b, new_lo)] + ([_vector(b, new_hi)] if state.type.shape[0] == 3 else [])
    return bits, tail


def _u128_add(b: Builder, lo: Value, hi: Value, d: Value):
    """(lo, hi) + d for a u64 ``d`` of any shape: the two u64 halves, broadcast to ``d``'s."""
    t = d.type
    lo_b = lo if t.rank == 0 else _bcast_scalar(b, lo, t)
    hi_b = hi if t.rank == 0 else _bcast_scalar(b, hi, t)
    new_lo = b.value("add", [lo_b, d])
    carry = b.value("compare", [new_lo, lo_b], attrs={"comparison_direction": "LT"})
    one = _const(b, 1, t.dtype) if t.rank == 0 else _full(b, 1, t)
    return new_lo, b.value("select", [carry, b.value("add", [hi_b, one]), hi_b])


def _mul_hi_lo(b: Builder, x: Value, m: int):
    """The high and low 32-bit halves of the 64-bit product ``x * m``."""
    t = TensorType(x.type.shape, element_type("u64"))
    p = b.value("multiply", [b.value("convert", [x], result_types=[t]), _full(b, m, t)])
    lo, hi = _u32s_of_u64(b, p)
    return hi, lo
