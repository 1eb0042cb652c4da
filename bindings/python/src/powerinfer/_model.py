"""Model: a loaded PowerInfer GGUF file, and make_synthetic_model for tests."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Literal, Optional, Union

from . import _powerinfer
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    from ._context import Context

__all__ = ["Model", "ModelInfo", "make_synthetic_model", "StrPath"]

StrPath = Union[str, "os.PathLike[str]"]

_ACTIVATIONS = {"auto": 0, "relu": 1, "silu": 2}


@dataclass(frozen=True)
class ModelInfo:
    """What ``pi_model_info_get`` reports about a loaded model."""

    architecture: str
    """``"llama"`` or ``"bamboo"``."""
    name: str
    """``general.name`` from the file, or ``""``."""
    n_params: int
    file_size: int
    """Bytes."""
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    sparse: bool
    """The file is a PowerInfer sparse file (with predictors)."""
    sparse_inference: bool
    """The predictor is used: a sparse file that is not forced dense."""
    ffn_activation: str
    """``"relu"`` or ``"silu"``: the FFN activation actually used."""
    sparse_threshold: float
    predictor_rank: tuple[int, ...]
    """fc1 rows per layer (0 for dense files)."""
    weight_type: str
    """Type of the FFN weights, e.g. ``"F16"``."""
    bos: int
    eos: int
    newline: int


class Model:
    """A loaded model: immutable weights, shared by any number of contexts and threads.

    Args:
        path: a PowerInfer GGUF file (sparse ``PWRI`` or dense ``GGUF`` magic).
        vram_budget: bytes of GPU memory a GPU backend may use; ``None``: free VRAM minus a
            margin. This build runs on the CPU and accepts the value for compatibility.
        n_threads: default CPU threads of the contexts created by :meth:`create_context`
            (``None``: the library's default).
        use_mmap: map the weights (default) rather than reading them into memory.
        progress: called with the loading progress in [0, 1]; returning ``False`` cancels
            loading (:class:`CancelledError`). An exception it raises propagates.
        dense: compute every FFN neuron, ignoring the predictor.
        ffn_activation: ``"auto"`` (from the file), ``"relu"`` or ``"silu"``; dense files only.
        sparse_threshold: override the file's predictor threshold.

    Raises:
        FileError: the file is missing or unreadable (the message names the path).
        FormatError: the file is malformed.
        UnsupportedError: valid, but not supported by this build.

    Loading releases the GIL; Ctrl-C interrupts it. ``close()`` (or leaving a ``with`` block)
    releases the model; contexts created from it keep the weights until they are closed too.
    """

    def __init__(
        self,
        path: StrPath,
        *,
        vram_budget: Optional[float] = None,
        n_threads: Optional[int] = None,
        use_mmap: bool = True,
        progress: Optional[Callable[[float], Optional[bool]]] = None,
        dense: bool = False,
        ffn_activation: Literal["auto", "relu", "silu"] = "auto",
        sparse_threshold: Optional[float] = None,
    ) -> None:
        if ffn_activation not in _ACTIVATIONS:
            raise InvalidArgumentError(
                f"ffn_activation must be 'auto', 'relu' or 'silu', not {ffn_activation!r}", -1
            )
        if n_threads is not None and n_threads < 1:
            raise InvalidArgumentError(f"n_threads must be at least 1, not {n_threads}", -1)
        if progress is not None and not callable(progress):
            raise TypeError("progress must be callable")
        self.path = os.fspath(path)
        self.n_threads = n_threads
        self._impl = _powerinfer._Model(
            os.fsencode(self.path),
            use_mmap=use_mmap,
            dense=dense,
            ffn_activation=_ACTIVATIONS[ffn_activation],
            sparse_threshold=sparse_threshold,
            vram_budget=vram_budget,
            progress=progress,
        )
        info = self._impl.info()
        info["predictor_rank"] = tuple(info["predictor_rank"])
        self._info = ModelInfo(**info)

    @property
    def info(self) -> ModelInfo:
        """Architecture, sizes, sparsity and special tokens of the model."""
        return self._info

    @property
    def n_vocab(self) -> int:
        return self._info.n_vocab

    @property
    def closed(self) -> bool:
        return self._impl.closed

    def tokenize(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of ``text`` (SPM), with the BOS token first when ``add_bos``."""
        return self._impl.tokenize(text, add_bos)

    def detokenize(self, ids: Iterable[int]) -> str:
        """The text of a token sequence (the inverse of :meth:`tokenize`).

        Bytes that do not form valid UTF-8 become U+FFFD. Raises :class:`InvalidArgumentError`
        for an id outside the vocabulary.
        """
        return self._impl.detokenize(list(ids))

    def token_to_piece(self, token: int) -> bytes:
        """The bytes of one token; a byte-fallback token may be part of a UTF-8 character."""
        return self._impl.token_to_piece(token)

    def create_context(
        self,
        n_ctx: int = 512,
        seed: Optional[int] = None,
        n_threads: Optional[int] = None,
        n_batch: int = 512,
        *,
        kv_f16: bool = True,
    ) -> Context:
        """A new :class:`Context` (KV cache and scratch memory) on this model.

        Args:
            n_ctx: KV cache size in tokens (0: the model's training context).
            seed: default sampling seed of the context's generations (``None``: random).
            n_threads: CPU threads (``None``: the model's ``n_threads`` or the library's
                default).
            n_batch: most tokens per forward pass.
            kv_f16: F16 (default) or F32 KV cache.
        """
        from ._context import Context

        return Context(
            self,
            n_ctx=n_ctx,
            seed=seed,
            n_threads=n_threads if n_threads is not None else self.n_threads,
            n_batch=n_batch,
            kv_f16=kv_f16,
        )

    def close(self) -> None:
        """Releases the model now (idempotent). Its contexts stay usable until closed."""
        self._impl.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        info = self._info
        state = "closed" if self.closed else f"{info.architecture}, {info.n_params} params"
        return f"<powerinfer.Model {self.path!r} ({state})>"


def make_synthetic_model(
    path: StrPath,
    vocab_path: StrPath,
    *,
    arch: Optional[Literal["llama", "bamboo"]] = None,
    n_embd: Optional[int] = None,
    n_layer: Optional[int] = None,
    n_head: Optional[int] = None,
    n_head_kv: Optional[int] = None,
    n_ff: Optional[int] = None,
    n_ctx_train: Optional[int] = None,
    predictor_rank: Optional[int] = None,
    f16: Optional[bool] = None,
    sparse: Optional[bool] = None,
    dense_relu: Optional[bool] = None,
    sparsity: Optional[float] = None,
    power_law: Optional[float] = None,
    predictor_noise: Optional[float] = None,
    seed: Optional[int] = None,
) -> str:
    """Writes a synthetic PowerInfer model (random weights, realistic activation sparsity, an
    exact or noisy predictor) over the tokenizer of a vocab-only GGUF file. A testing helper:
    the same generator as the ``pi-make-model`` tool (``pi_synth_model_write``).

    Unset arguments keep the library's defaults (:func:`synthetic_model_defaults`);
    ``n_head_kv`` defaults to ``n_head``. Returns ``path`` as a string.
    """
    given = {
        "arch": arch,
        "n_embd": n_embd,
        "n_layer": n_layer,
        "n_head": n_head,
        "n_head_kv": n_head_kv,
        "n_ff": n_ff,
        "n_ctx_train": n_ctx_train,
        "predictor_rank": predictor_rank,
        "f16": None if f16 is None else int(f16),
        "sparse": None if sparse is None else int(sparse),
        "dense_relu": None if dense_relu is None else int(dense_relu),
        "sparsity": sparsity,
        "power_law": power_law,
        "predictor_noise": predictor_noise,
        "seed": seed,
    }
    out = os.fspath(path)
    _powerinfer.synth_model_write(
        os.fsencode(out),
        os.fsencode(os.fspath(vocab_path)),
        {k: v for k, v in given.items() if v is not None},
    )
    return out


def synthetic_model_defaults() -> dict[str, object]:
    """The library's defaults for :func:`make_synthetic_model`."""
    return dict(_powerinfer.synth_defaults())
