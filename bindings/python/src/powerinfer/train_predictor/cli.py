"""powerinfer-train-predictor's command line; every failure is one line on stderr."""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

PROG = "powerinfer-train-predictor"


class UsageError(Exception):
    pass


def _rank(text: str) -> object:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a positive integer or 'auto', not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive integer or 'auto', not {text!r}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"a fraction in (0, 1), not {text!r}")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a finite number, not {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"a finite number > 0, not {text!r}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive integer, not {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=(
        "Train PowerInfer activation predictors for a ReLU model from a text corpus."))
    p.add_argument("-m", "--model", required=True, type=Path,
                   help="GGUF file of the model (dense ReLU file, or a sparse file: run dense)")
    p.add_argument("-f", "--file", required=True, type=Path, help="UTF-8 text corpus")
    p.add_argument("-o", "--out", required=True, type=Path, help="output folder")
    p.add_argument("--rank", type=_rank, default="auto",
                   help="predictor rank for every layer, or 'auto' (default): per layer the "
                        "smallest of --ranks that meets the targets")
    p.add_argument("--ranks", type=lambda s: [_positive(v) for v in s.split(",")],
                   help="candidate ranks of --rank auto (default: n_embd/16, /8, /4, /2, n_embd)")
    p.add_argument("--threshold", type=_finite, default=0.0,
                   help="decision threshold T: active where score >= T (default 0)")
    p.add_argument("--recall-target", type=_fraction, default=0.95)
    p.add_argument("--max-ratio", type=_positive_float, default=1.5,
                   help="most predicted over true active fraction for --rank auto (default 1.5)")
    p.add_argument("--n-ctx", type=_positive, default=512, help="tokens per window (default 512)")
    p.add_argument("--max-tokens", type=_positive, default=262144,
                   help="corpus tokens to read (default 262144)")
    p.add_argument("--holdout", type=_fraction, default=0.1,
                   help="fraction of the windows held out to select the checkpoint, pos_weight "
                        "and rank (the report's selection figures)")
    p.add_argument("--eval-file", type=Path, default=None,
                   help="also score every layer on this text, which steers nothing: unbiased "
                        "figures (e.g. books the corpus lacks)")
    p.add_argument("--epochs", type=_positive, default=10, help="most epochs per fit (default 10)")
    p.add_argument("--patience", type=_positive, default=3,
                   help="epochs without a better checkpoint before a fit stops (default 3)")
    p.add_argument("--pos-weight", type=_positive_float, default=5.0,
                   help="initial weight of the active class in the loss (default 5)")
    p.add_argument("--dtype", choices=("f16", "f32"), default="f16",
                   help="type of the written predictor weights (default f16)")
    p.add_argument("--threads", type=_positive, default=None, help="CPU threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", type=Path, default=None,
                   help="folder for the collected samples (default: the staging folder beside -o)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    import powerinfer

    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except (UsageError, powerinfer.Error, ValueError) as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _run(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise UsageError("torch is missing: install the train extra "
                         "(pip install 'powerinfer[train]')") from None
    import numpy as np
    import powerinfer

    from .collect import collect
    from .corpus import CorpusError, is_held_out, read_tokens, windows
    from .fit import FitOptions, LayerTensors, evaluate, fit
    from .output_folder import commit, staged
    from .ranks import candidates, choose
    from .report import layer_row, print_table
    from .writers import write_activation_stats, write_json, write_predictor

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    if not args.file.is_file():
        raise UsageError(f"{args.file}: no such corpus file")
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.monotonic()
    try:
        model = powerinfer.Model(args.model, dense=True, offload_device="none",
                                 n_threads=args.threads)
    except powerinfer.Error as e:
        raise UsageError(str(e)) from None
    info = model.info
    if info.ffn_activation != "relu":
        raise UsageError(f"{args.model}: the model's FFN activation is {info.ffn_activation}, "
                         "not relu: predictors need a ReLU model (convert a hidden_act=relu "
                         "checkpoint; a dense file needs powerinfer.ffn_activation = relu)")
    n_ctx = min(args.n_ctx, info.n_ctx_train) if info.n_ctx_train else args.n_ctx
    if args.eval_file is not None and not args.eval_file.is_file():
        raise UsageError(f"{args.eval_file}: no such evaluation file")
    try:
        tokens = read_tokens(model, args.file, args.max_tokens)
        eval_win = None
        if args.eval_file is not None:
            eval_win = windows(read_tokens(model, args.eval_file, args.max_tokens), n_ctx, info.bos)
    except CorpusError as e:
        raise UsageError(str(e)) from None
    if eval_win is not None and len(eval_win) == 0:
        raise UsageError(f"{args.eval_file}: shorter than one window of {n_ctx} tokens")
    win = windows(tokens, n_ctx, info.bos)
    held = is_held_out(len(win), args.holdout)
    if held.sum() < 1 or (~held).sum() < 1:
        raise UsageError(f"{args.file}: {tokens.size} tokens make {len(win)} windows of {n_ctx}: "
                         f"too few for a held-out fraction of {args.holdout}; give more text or "
                         "a smaller --n-ctx")
    log(f"{args.file}: {tokens.size} tokens, {len(win)} windows of {n_ctx} "
        f"({int(held.sum())} held out); {info.n_layer} layers, n_embd {info.n_embd}, "
        f"n_ff {info.n_ff}")
    with staged(args.out) as stage:
        try:
            ctx = model.create_context(n_ctx=n_ctx, n_threads=args.threads, n_batch=n_ctx)
        except powerinfer.Error as e:
            raise UsageError(f"{args.model}: {e}") from None
        with tempfile.TemporaryDirectory(prefix=".collect-", dir=args.work_dir or stage) as work:
            def progress(done: int, total: int) -> None:
                if done == total or done % 16 == 0:
                    log(f"traced {done}/{total} windows")

            try:
                data = collect(ctx, win, held, info.n_layer, info.n_embd, info.n_ff, Path(work),
                               progress)
                evaluation = None
                if eval_win is not None:
                    (Path(work) / "eval").mkdir()
                    evaluation = collect(ctx, eval_win, np.ones(len(eval_win), dtype=bool),
                                         info.n_layer, info.n_embd, info.n_ff, Path(work) / "eval",
                                         lambda done, total: None)
            except powerinfer.Error as e:
                raise UsageError(f"{args.model}: {e}") from None
            ctx.close()
            model.close()
            dtype = torch.float16 if args.dtype == "f16" else torch.float32
            opt = FitOptions(threshold=args.threshold, recall_target=args.recall_target,
                             pos_weight=args.pos_weight, epochs=args.epochs, patience=args.patience,
                             seed=args.seed, dtype=dtype)
            ranks = args.ranks or candidates(info.n_embd, info.n_ff)
            rows = []
            for layer in range(info.n_layer):
                tensors = LayerTensors(data.layer(layer), info.n_ff)
                log(f"layer {layer}:")
                if args.rank == "auto":
                    result = choose(tensors, ranks, opt, args.max_ratio, log)
                else:
                    result = fit(tensors, args.rank, opt, log)
                write_predictor(stage, layer, result.predictor.exported(dtype))
                row = layer_row(layer, result, args.recall_target, args.max_ratio)
                if evaluation is not None:
                    other = LayerTensors(evaluation.layer(layer), info.n_ff)
                    row["eval_file"] = evaluate(result.predictor, other, args.threshold).as_dict()
                    del other
                rows.append(row)
                del tensors
            write_activation_stats(stage / "activation_stats.gguf", data.activation_counts,
                                   data.n_tokens)
        config = {
            "sparse_threshold": args.threshold,
            "n_layer": info.n_layer,
            "n_embd": info.n_embd,
            "n_ff": info.n_ff,
            "rank": [r["rank"] for r in rows],
            "dtype": args.dtype,
            "trained_by": f"{PROG} {powerinfer.__version__}",
        }
        write_json(stage / "config.json", config)
        report = {
            "model": str(args.model),
            "corpus": str(args.file),
            "tokens": int(tokens.size),
            "n_ctx": n_ctx,
            "selection_tokens": int(held.sum()) * n_ctx,
            "eval_file": None if args.eval_file is None else str(args.eval_file),
            "eval_tokens": 0 if eval_win is None else int(eval_win.size),
            "threshold": args.threshold,
            "recall_target": args.recall_target,
            "max_ratio": args.max_ratio,
            "seconds": round(time.monotonic() - started, 1),
            "layers": rows,
        }
        write_json(stage / "report.json", report)
        commit(stage, args.out)
    print_table(rows, sys.stdout)
    missed = [r["layer"] for r in rows if not r["meets_targets"]]
    if missed:
        log(f"layers {missed} miss the targets (recall >= {args.recall_target}, predicted "
            f"<= {args.max_ratio} x true active): see report.json")
    return 0


def _fail(message: str, code: int = 1) -> int:
    print(f"{PROG}: {' '.join(message.split())}", file=sys.stderr)
    return code
