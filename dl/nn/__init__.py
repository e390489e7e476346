"""Modules, initialised and behaving as PyTorch's (tests compare them with copied weights)."""
from . import functional, init, parallel, utils
from .activation import (
    GELU,
    CrossEntropyLoss,
    Dropout,
    Identity,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from .activation_extra import *  # noqa: F403  (each module exports its __all__)
from .activation_hard import *  # noqa: F403
from .activation_softmin import *  # noqa: F403
from .attention import MultiheadAttention, TransformerEncoderLayer
from .containers import ModuleList, Sequential
from .distance import *  # noqa: F403
from .dropout_channels import *  # noqa: F403
from .layers import (
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2d,
)
from .layers_extra import *  # noqa: F403
from .losses import *  # noqa: F403
from .module import Module
from .padding import *  # noqa: F403
from .parameter import Parameter
from .parameter_containers import *  # noqa: F403
from .pixel_shuffle import *  # noqa: F403
from .pool1d import *  # noqa: F403
from .rnn_elman import *  # noqa: F403
from .transformer import Transformer, TransformerDecoder
from .transformer_encoder import TransformerEncoder
from .unflatten import *  # noqa: F403

MultiHeadAttention = MultiheadAttention
