"""hlo.nn: neural-network functions (jax.nn's definitions), built on hlo.numpy.

``dropout`` (which needs ``hlo.random``) is added by the module that defines it."""
from .activations import (relu, relu6, leaky_relu, elu, sigmoid, silu, swish, log_sigmoid, softplus,
                          gelu, softmax, log_softmax, logsumexp, standardize, one_hot)
from .normalization import layer_norm, rms_norm
from .dropout import dropout
from .more_activations import (identity, tanh, celu, selu, glu, hard_sigmoid, hard_silu, hard_swish,
                               hard_tanh, mish, soft_sign, sparse_plus, sparse_sigmoid, squareplus,
                               log1mexp, logmeanexp)
from .attention import dot_product_attention, scaled_matmul
from .scaled_dot import scaled_dot_general, get_scaled_dot_general_config


def _install_missing_names():  # hnp.foo: "did you mean ...?", and whether jax has it
    from hlo.base import missing
    missing.install(__name__)


_install_missing_names()
