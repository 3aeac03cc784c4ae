"""hlo.lax.fft (jax.lax.fft's signature: a kind and the lengths of the trailing transformed
dimensions), written with hlo.numpy.fft's n-dimensional transforms; ``hlo.lax`` loads it on
first use, as it does linalg."""
from __future__ import annotations

from typing import Sequence

from ..lax.conveniences import FftType
from ..tracing.api_util import api_function
from ..tracing.tracer import Tracer
from . import creation as cr
from . import fft as _fft


@api_function
def fft(x, fft_type, fft_lengths: Sequence[int]) -> Tracer:
    """FFT / IFFT (complex, the trailing ``fft_lengths`` dimensions as they are), RFFT (real
    to the half spectrum) or IRFFT (back to real of ``fft_lengths``)."""
    if isinstance(fft_type, str):
        try:
            fft_type = FftType[fft_type.upper()]
        except KeyError:
            raise ValueError(f"lax.fft: unknown fft_type {fft_type!r}; one of FFT, IFFT, RFFT, IRFFT") from None
    fft_type = FftType(fft_type)
    t = cr.asarray(x)
    lengths = [int(n) for n in fft_lengths]
    k = len(lengths)
    if not 1 <= k <= 3 or k > t.ndim:
        raise ValueError(f"lax.fft: fft_lengths must name 1 to 3 trailing dimensions of {t.shape}, got {lengths}")
    axes = list(range(t.ndim - k, t.ndim))
    if fft_type in (FftType.FFT, FftType.IFFT, FftType.RFFT) and list(t.shape[-k:]) != lengths:
        raise ValueError(f"lax.fft: fft_lengths {lengths} must equal the operand's trailing dimensions "
                         f"{list(t.shape[-k:])}")
    if fft_type == FftType.FFT:
        return _fft.fftn(t, axes=axes)
    if fft_type == FftType.IFFT:
        return _fft.ifftn(t, axes=axes)
    if fft_type == FftType.RFFT:
        return _fft.rfftn(t, axes=axes)
    return _fft.irfftn(t, s=lengths, axes=axes)
