"""Model: a loaded PowerInfer GGUF file, and make_synthetic_model for tests."""

from __future__ import annotations

import math
import numbers
import operator
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Optional, Sequence, Union

from . import _powerinfer
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    from ._context import Context

__all__ = ["Model", "ModelInfo", "make_synthetic_model", "StrPath", "OffloadDevice"]

StrPath = Union[str, "os.PathLike[str]"]

_ACTIVATIONS = {"auto": 0, "relu": 1, "silu": 2}
_OFFLOAD_DEVICES = ("auto", "cuda", "hip", "cpu", "none")
_INT32_MAX = 2**31 - 1

OffloadDevice = Literal["auto", "cuda", "hip", "cpu", "none"]


def _vram_budget(value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"vram_budget must be a number of bytes or None, not {type(value).__name__}"
        )
    if math.isnan(value):
        raise InvalidArgumentError("vram_budget is NaN", -1)
    return float(value)


def _offload_device(name: Optional[str], vram_budget: Optional[float]) -> Optional[str]:
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"offload_device must be a str or None, not {type(name).__name__}")
    if name not in _OFFLOAD_DEVICES:
        raise InvalidArgumentError(
            f"offload_device must be one of {', '.join(_OFFLOAD_DEVICES)}, not {name!r}", -1
        )
    if name == "cpu" and (vram_budget is None or vram_budget < 0):
        raise InvalidArgumentError(
            "offload_device='cpu' needs an explicit vram_budget in bytes (>= 0), "
            f"not {vram_budget!r}",
            -1,
        )
    return name


def _kv_n_ctx(value: int) -> int:
    if isinstance(value, bool):
        raise TypeError("kv_n_ctx must be an int, not bool")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"kv_n_ctx must be an int, not {type(value).__name__}") from None
    if not 0 <= n <= _INT32_MAX:
        raise InvalidArgumentError(f"kv_n_ctx must be in [0, 2**31 - 1], not {n}", -1)
    return n


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
    offload_device: str = ""
    """The offload device (e.g. ``"cuda"``, ``"cpu (second instance)"``), ``""`` when everything
    runs on the CPU."""
    offload_bytes: int = 0
    """Bytes of weights on the offload device: dense blocks and hot FFN rows."""
    hot_neurons: tuple[int, ...] = ()
    """FFN neurons on the offload device, per layer."""
    attn_on_device: tuple[bool, ...] = ()
    """Per layer: the attention weights are on the offload device."""
    predictor_on_device: tuple[bool, ...] = ()
    """Per layer: the predictor is on the offload device."""
    output_on_device: bool = False
    """The output norm and projection are on the offload device."""
    kv_n_ctx_on_device: int = 0
    """KV cache positions reserved on the offload device (0: the KV cache is in host memory)."""
    eot: int = -1
    """The end-of-turn token (``tokenizer.ggml.eot_token_id`` or a known end-of-turn text), -1
    if none."""


class Model:
    """A loaded model: immutable weights, shared by any number of contexts and threads.

    Args:
        path: a PowerInfer GGUF file (sparse ``PWRI`` or dense ``GGUF`` magic).
        vram_budget: bytes of memory the offload device may hold; ``None``: its free memory
            minus a margin; 0: offload nothing. The device (a GPU backend module, or
            ``offload_device="cpu"``) receives the dense blocks (attention, predictors,
            output), the KV cache when ``kv_n_ctx`` is set, and the hot FFN neurons that fit;
            the cold neurons stay on the CPU. Only sparse inference offloads.
        offload_device: where the hot neurons go: ``"auto"`` (a CUDA or HIP device when one is
            usable, else none), ``"cuda"``, ``"hip"``, ``"none"``, or ``"cpu"`` (a second CPU
            backend instance limited to ``vram_budget`` bytes: the hybrid path without a GPU,
            for testing; it needs an explicit ``vram_budget``). ``None``: the library's
            default (``"auto"``).
        kv_n_ctx: KV cache positions to reserve on the offload device once every dense block
            fits there; contexts with ``n_ctx`` up to this keep the KV cache of device attention
            layers on the device. 0 (default): the KV cache stays in host memory.
        reset_gpu_index: ignore the cached ``<model>.generated.gpuidx`` and plan again (the new
            plan is written there).
        disable_gpu_index: keep every FFN neuron on the CPU; dense blocks are still offloaded.
        activation_stats: activation statistics for the planner: a statistics GGUF file or
            PowerInfer's ``activation/`` folder. ``None``: ``<model dir>/activation`` when
            present, else a short calibration run of the predictors.
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
        UnsupportedError: valid, but not supported by this build (e.g. ``offload_device="cuda"``
            without the CUDA backend module).
        InvalidArgumentError: a bad argument (the message names it).

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
        offload_device: Optional[OffloadDevice] = None,
        kv_n_ctx: int = 0,
        reset_gpu_index: bool = False,
        disable_gpu_index: bool = False,
        activation_stats: Optional[StrPath] = None,
    ) -> None:
        if ffn_activation not in _ACTIVATIONS:
            raise InvalidArgumentError(
                f"ffn_activation must be 'auto', 'relu' or 'silu', not {ffn_activation!r}", -1
            )
        if n_threads is not None and n_threads < 1:
            raise InvalidArgumentError(f"n_threads must be at least 1, not {n_threads}", -1)
        if progress is not None and not callable(progress):
            raise TypeError("progress must be callable")
        budget = _vram_budget(vram_budget)
        device = _offload_device(offload_device, budget)
        kv_positions = _kv_n_ctx(kv_n_ctx)
        stats_path = None if activation_stats is None else os.fsencode(os.fspath(activation_stats))
        self.path = os.fspath(path)
        self.n_threads = n_threads
        self._impl = _powerinfer._Model(
            os.fsencode(self.path),
            use_mmap=use_mmap,
            dense=dense,
            ffn_activation=_ACTIVATIONS[ffn_activation],
            sparse_threshold=sparse_threshold,
            vram_budget=budget,
            offload_device=device,
            kv_n_ctx=kv_positions,
            reset_gpu_index=reset_gpu_index,
            disable_gpu_index=disable_gpu_index,
            activation_stats=stats_path,
            progress=progress,
        )
        info = self._impl.info()
        for per_layer in ("predictor_rank", "hot_neurons", "attn_on_device", "predictor_on_device"):
            info[per_layer] = tuple(info[per_layer])
        self._info = ModelInfo(**info)

    @property
    def info(self) -> ModelInfo:
        """Architecture, sizes, sparsity, special tokens and device placement of the model."""
        return self._info

    @property
    def n_vocab(self) -> int:
        return self._info.n_vocab

    @property
    def closed(self) -> bool:
        return self._impl.closed

    def tokenize(self, text: str, add_bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of ``text`` (SPM), with the BOS token first when ``add_bos``.

        ``special=True`` reads the text of control tokens (``"<s>"``, ``"<|im_start|>"``) as
        those tokens, as a chat template's output needs; otherwise it is plain text."""
        return self._impl.tokenize(text, add_bos, special)

    @property
    def token_eot(self) -> int:
        """The end-of-turn token, -1 if the model has none."""
        return self._info.eot

    def token_is_eog(self, token: int) -> bool:
        """Whether ``token`` ends generation (EOS, EOT or another end-of-turn token).

        Raises :class:`InvalidArgumentError` for an id outside the vocabulary."""
        return self._impl.token_is_eog(token)

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        template: Optional[str] = None,
        add_assistant: bool = True,
    ) -> str:
        """Renders ``[{"role": ..., "content": ...}]`` with a chat template
        (``docs/chat-templates.md``).

        ``template`` ``None``: the model's ``tokenizer.chat_template``; else a template name
        (``"llama2"``, ``"chatml"``, ``"vicuna"``, ``"zephyr"``, ``"mistral"``, ``"llama3"``)
        or a Jinja template text that is recognised. ``add_assistant`` ends the text with the
        opening of the assistant's turn. The text holds special tokens: tokenize it with
        ``special=True``.

        Raises:
            UnsupportedError: an unknown template (the message names it).
            InvalidArgumentError: a message without a role, or a NUL in the text.
        """
        from ._chat import chat_messages

        return self._impl.apply_chat_template(chat_messages(messages), template, add_assistant)

    def chat_template_name(self, template: Optional[str] = None) -> str:
        """The name of the template :meth:`apply_chat_template` would use (e.g. ``"chatml"``)
        for ``template`` (``None``: the model's own)."""
        return self._impl.chat_template_name(template)

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
        n_seq_max: int = 1,
    ) -> Context:
        """A new :class:`Context` (KV cache and scratch memory) on this model.

        Args:
            n_ctx: KV cache size in tokens (0: the model's training context).
            seed: default sampling seed of the context's generations (``None``: random).
            n_threads: CPU threads (``None``: the model's ``n_threads`` or the library's
                default).
            n_batch: most tokens per forward pass.
            kv_f16: F16 (default) or F32 KV cache.
            n_seq_max: sequences the cache holds at once (ids ``0 .. n_seq_max - 1``, at most
                64); they share its ``n_ctx`` cells.
        """
        from ._context import Context

        return Context(
            self,
            n_ctx=n_ctx,
            seed=seed,
            n_threads=n_threads if n_threads is not None else self.n_threads,
            n_batch=n_batch,
            kv_f16=kv_f16,
            n_seq_max=n_seq_max,
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
    arch: Optional[
        Literal["llama", "llama-relu", "prosparse", "bamboo", "falcon", "falcon-40b", "opt"]
    ] = None,
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
