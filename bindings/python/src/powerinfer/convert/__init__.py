"""powerinfer-convert: Hugging Face checkpoints to PowerInfer GGUF files, without torch.

    from powerinfer.convert import convert
    convert("ReluLLaMA-7B", "ReluLLaMA-7B-Predictor", outtype="q4_0")

or on the command line `powerinfer-convert [--outtype T] [--outfile F] [--dense] MODEL_DIR
[PREDICTOR_DIR]` (also `python -m powerinfer.convert`). See docs/converter.md."""

from .cli import main
from .converter import OUTTYPES, convert, default_outfile
from .errors import ConvertError

__all__ = ["ConvertError", "OUTTYPES", "convert", "default_outfile", "main"]
