"""End-to-end check of the engine against the NumPy oracle on synthetic models.

  test_oracle_compare.py --dump DUMP_LOGITS --make-model PI_MAKE_MODEL --vocab VOCAB [--work DIR]

For a set of tiny models (F32/F16, sparse/dense, llama/bamboo, GQA and not) it
  1. checks the generator through the oracle alone: exact predictor (no disagreement with the
     gate sign outside ties), inactive fraction near the requested sparsity, skewed firing
     frequencies, a noisy predictor that really misses neurons, sane logits, identical weights
     and logits for the sparse and dense twin of one seed, byte-identical files for one seed;
  2. runs dump_logits (the engine through powerinfer.h) on a fixed token list and compares the
     logits of every position with the oracle: max|diff| <= rtol * max|logit|, as one batch and,
     for some models, token by token.
Prints "SKIPPED: ..." and passes when NumPy is missing, unless CI=true. The vocabulary is the
repository's own, tests/data/relu-llama-kjv.vocab.gguf (docs/fixture.md).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TINY = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-ff", "176"]

# name -> (pi-make-model flags, compare token by token too)
MODELS = {
    "llama_sparse_f32": (TINY + ["--n-head-kv", "4", "--seed", "11"], True),
    "llama_sparse_f16_gqa": (TINY + ["--n-head-kv", "2", "--f16", "--seed", "12"], True),
    "llama_dense_f16_gqa": (TINY + ["--n-head-kv", "2", "--f16", "--dense", "--seed", "12"], False),
    "llama_swiglu_f32": (TINY + ["--n-head-kv", "4", "--dense", "--dense-swiglu", "--seed", "13"],
                         False),
    "bamboo_sparse_f32_gqa": (TINY + ["--arch", "bamboo", "--n-head-kv", "2", "--seed", "14"],
                              True),
    "bamboo_dense_f16": (TINY + ["--arch", "bamboo", "--n-head-kv", "4", "--f16", "--dense",
                                 "--seed", "15"], False),
    "llama_noisy_f32": (TINY + ["--n-head-kv", "4", "--predictor-noise", "0.3", "--seed", "11"],
                        False),
}

N_AUDIT_TOKENS = 128


def skip_or_fail(reason):
    if os.environ.get("CI", "").lower() == "true":
        print(f"FAILED: {reason} (CI=true)")
        sys.exit(1)
    print(f"SKIPPED: {reason}")
    sys.exit(0)


class Checker:
    def __init__(self):
        self.failures = []

    def check(self, ok, what):
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failures.append(what)


def run(cmd):
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {res.returncode}: "
                           f"{res.stderr.strip() or res.stdout.strip()}")
    return res


def audit_model(c, np, oracle, name, path, audit_tokens):
    model = oracle.Model(str(path))
    audits, logits = model.audit(audit_tokens)
    flat = logits.ravel()
    c.check(bool(np.isfinite(flat).all()) and 0.5 < flat.std() < 20,
            f"{name}: logits finite with a sane spread (std {flat.std():.2f})")
    greedy = logits.argmax(axis=-1)
    distinct = len(set(greedy.tolist()))
    c.check(distinct > len(greedy) // 2,
            f"{name}: greedy tokens vary ({distinct} distinct of {len(greedy)})")
    if not model.file.sparse:
        return
    inactive = 1 - sum(a.true_active for a in audits) / sum(a.tokens * a.n_ff for a in audits)
    c.check(0.85 <= inactive <= 0.93, f"{name}: inactive fraction {inactive:.4f} in [0.85, 0.93]")
    share = min(a.top_share(0.1) for a in audits)
    c.check(share > 0.3, f"{name}: top 10% of neurons make {share:.3f} > 0.3 of firings")
    recall = min(a.recall for a in audits)
    precision = min(a.precision for a in audits)
    mismatches = sum(a.mismatch_outside_ties for a in audits)
    if "noisy" in name:
        c.check(recall < 0.99, f"{name}: noisy predictor recall {recall:.4f} < 0.99")
    else:
        c.check(mismatches == 0,
                f"{name}: predictor equals the gate sign (recall {recall:.4f}, precision "
                f"{precision:.4f}, {mismatches} disagreements outside |g| < {oracle.TIE})")


def compare_engine(c, np, oracle, name, path, dump, tokens, one_by_one, rtol, work):
    ref = oracle.Model(str(path)).forward(tokens)
    modes = [("batch", [])] + ([("one-by-one", ["--batch-one-by-one"])] if one_by_one else [])
    for mode, flags in modes:
        out = work / f"{name}.{mode}.f32"
        try:
            run([dump, "-m", path, "--tokens", ",".join(map(str, tokens)), "-o", out] + flags)
        except RuntimeError as e:
            c.check(False, f"{name} ({mode}): engine run: {e}")
            continue
        got = np.fromfile(out, dtype="<f4")
        if got.size != ref.size:
            c.check(False, f"{name} ({mode}): {got.size} logits, expected {ref.size}")
            continue
        got = got.reshape(ref.shape).astype(np.float64)
        diff = np.abs(got - ref).max()
        scale = np.abs(ref).max()
        c.check(diff <= rtol * scale,
                f"{name} ({mode}): max|engine - oracle| {diff:.3g} <= {rtol} * {scale:.3g}")


def main():
    ap = argparse.ArgumentParser(description="engine vs NumPy oracle on synthetic models")
    ap.add_argument("--dump", required=True, help="path of dump_logits")
    ap.add_argument("--make-model", required=True, help="path of pi-make-model")
    ap.add_argument("--vocab", required=True, help="vocab-only GGUF (relu-llama-kjv.vocab.gguf)")
    ap.add_argument("--work", help="scratch folder, removed when every check passes "
                                    "(default: a temporary one)")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--oracle-only", action="store_true", help="skip the engine comparison")
    args = ap.parse_args()

    try:
        import numpy as np
    except ImportError:
        skip_or_fail(f"NumPy is not installed for {sys.executable}")
    if not Path(args.vocab).is_file():
        print(f"FAILED: vocabulary {args.vocab} not found")
        return 1
    import oracle

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="pi-oracle-"))
    work.mkdir(parents=True, exist_ok=True)
    c = Checker()
    try:
        paths = {}
        for name, (flags, _) in MODELS.items():
            paths[name] = work / f"{name}.gguf"
            run([args.make_model, "-o", paths[name], "--vocab", args.vocab] + flags)
        n_vocab = oracle.Model(str(paths["llama_sparse_f32"])).n_vocab
        rng = np.random.default_rng(1234)
        tokens = [1] + rng.integers(3, n_vocab, 31).tolist()
        audit_tokens = [1] + rng.integers(3, n_vocab, N_AUDIT_TOKENS - 1).tolist()

        again = work / "again.gguf"
        run([args.make_model, "-o", again, "--vocab", args.vocab] + MODELS["llama_sparse_f32"][0])
        c.check(again.read_bytes() == paths["llama_sparse_f32"].read_bytes(),
                "one seed gives a byte-identical file")

        for name, path in paths.items():
            audit_model(c, np, oracle, name, path, audit_tokens)

        twin = [oracle.Model(str(paths[n])).forward(tokens)
                for n in ("llama_sparse_f16_gqa", "llama_dense_f16_gqa")]
        diff = np.abs(twin[0] - twin[1]).max()
        c.check(diff <= 1e-9 * np.abs(twin[1]).max(),
                f"sparse file with exact predictor == its dense twin (max diff {diff:.3g})")

        if not args.oracle_only:
            for name, (_, one_by_one) in MODELS.items():
                compare_engine(c, np, oracle, name, paths[name], args.dump, tokens, one_by_one,
                               args.rtol, work)
    except RuntimeError as e:
        c.check(False, str(e))
    if c.failures:
        print(f"{len(c.failures)} check(s) failed; models and logits kept in {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
