"""Python binding of libpowerinfer: inference for ReLU-sparse LLMs in PowerInfer GGUF files.

    import powerinfer

    with powerinfer.Model("model.powerinfer.gguf") as model:
        ctx = model.create_context(n_ctx=1024)
        print(ctx.generate("Once upon a time", max_tokens=64))
        for piece in ctx.stream("The meaning of life is", temperature=0):
            print(piece, end="", flush=True)
        reply = ctx.create_chat_completion(
            messages=[{"role": "user", "content": "Hello"}], max_tokens=32)
        print(reply["choices"][0]["message"]["content"])

A :class:`Model` holds immutable weights shared by any number of :class:`Context` objects and
threads; a context is one conversation, used by one thread at a time. Failures raise
:class:`Error` subclasses carrying the library's message.
"""

from __future__ import annotations

from . import _powerinfer
from ._context import Context, ContextStats, FfnTrace
from ._errors import (
    CancelledError,
    ContextFullError,
    Error,
    FileError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._generation import GenerationResult, Stream, TokenEvent, TokenStream
from ._model import Model, ModelInfo, make_synthetic_model, synthetic_model_defaults
from ._sampling import LLAMA_CPP_DEFAULTS, SAMPLER_STAGES, Sampler

__version__: str = _powerinfer.version()
"""The version of the bundled libpowerinfer (the package has the same version)."""


def system_info() -> str:
    """Version, CPU features and backends of the bundled libpowerinfer (``pi_system_info``)."""
    return _powerinfer.system_info()


__all__ = [
    "LLAMA_CPP_DEFAULTS",
    "SAMPLER_STAGES",
    "CancelledError",
    "Context",
    "ContextFullError",
    "ContextStats",
    "Error",
    "FfnTrace",
    "FileError",
    "FormatError",
    "GenerationResult",
    "InternalError",
    "InvalidArgumentError",
    "Model",
    "ModelInfo",
    "OutOfMemoryError",
    "Sampler",
    "Stream",
    "TokenEvent",
    "TokenStream",
    "UnsupportedError",
    "__version__",
    "make_synthetic_model",
    "synthetic_model_defaults",
    "system_info",
]
