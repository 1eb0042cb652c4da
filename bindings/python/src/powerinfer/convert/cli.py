"""powerinfer-convert's command line. Bad input: exit 1 and one line on stderr,
`powerinfer-convert: <file>: <tensor>: <reason>`; usage errors: exit 2."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Optional, Sequence

from .converter import OUTTYPES, convert, stderr_log
from .errors import ConvertError

PROG = "powerinfer-convert"


def _threshold(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Convert a Hugging Face checkpoint folder to a PowerInfer sparse GGUF (with its predictor) or, with --dense, a plain GGUF.",
    )
    p.add_argument("--outtype", choices=OUTTYPES, default="f16", help="weight type (default f16; q8_0/q4_0 are quantized by libpowerinfer)")
    p.add_argument("--outfile", type=Path, help="output path (default MODEL_DIR/<folder>.<outtype>.powerinfer.gguf, or .<outtype>.gguf with --dense)")
    p.add_argument("--dense", action="store_true", help="write a plain GGUF with ffn_down and no predictor (llama.cpp loads it too)")
    p.add_argument("--threshold", type=_threshold, help="powerinfer.sparse_threshold, overriding the predictor's config.json")
    p.add_argument("--keep-predictor", action="store_true", help="with q8_0/q4_0: leave fc1/fc2 at F16/F32 instead of quantizing them")
    p.add_argument("--threads", type=int, default=0, help="quantization threads (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or notes")
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    p.add_argument("predictor_dir", type=Path, nargs="?", metavar="PREDICTOR_DIR", help="folder of model_{L}.pt or predictor safetensors (needed for sparse output unless the checkpoint holds the predictor)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        out = convert(
            args.model_dir,
            args.predictor_dir,
            outfile=args.outfile,
            outtype=args.outtype,
            dense=args.dense,
            threshold=args.threshold,
            keep_predictor=args.keep_predictor,
            n_threads=args.threads,
            progress=not args.quiet and sys.stderr.isatty(),
            log=None if args.quiet else stderr_log,
        )
    except ConvertError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
    except KeyboardInterrupt:
        return _fail("interrupted; no output was written", 130)
    except Exception as e:  # a bug, still reported as one line (the temporary file is gone)
        return _fail(f"internal error: {type(e).__name__}: {e}")
    print(out)
    return 0


def _fail(message: str, code: int = 1) -> int:
    print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)
    return code
