"""Plain NumPy forward pass of llama/bamboo PowerInfer GGUF files: the reference for the engine.

Semantics follow docs/forward-pass.md: RMSNorm, RoPE mode 0 (adjacent pairs), grouped-query
causal attention, and an FFN that is either
  sparse (PWRI file): neuron i of token t is computed iff fc2·relu(fc1·h_t) >= threshold, where
      h_t is the residual before ffn_norm; a = relu(gate·xn)⊙(up·xn) for llama and
      relu(gate·xn)⊙relu(up·xn) for bamboo; y = Σ_active a_i · ffn_down_t[i]
  dense (GGUF file): ffn_down · act, where act is the ReLU form above when the file says
      powerinfer.ffn_activation = "relu" and SwiGLU silu(gate·xn)⊙(up·xn) otherwise.
Everything is computed in float64 from the stored (F32 or F16) weights.

CLI:
  oracle.py MODEL --tokens 1,2,3 --out logits.npy     logits of every position, float32 [T, V]
  oracle.py MODEL --random-tokens 64 --audit          per-layer sparsity and predictor quality
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_lite  # noqa: E402

TIE = 1e-6  # |gate·xn| below this is a tie: predictor and gate may disagree by rounding


def _f64(a):
    return np.asarray(a, dtype=np.float64)


class LayerAudit:
    """Per-layer counts over all tokens of a forward pass."""

    def __init__(self, n_ff):
        self.tokens = 0
        self.true_active = 0       # gate·xn > 0
        self.pred_active = 0       # predictor score >= threshold
        self.both = 0
        self.mismatch_outside_ties = 0
        self.firing = np.zeros(n_ff, dtype=np.int64)  # per-neuron count of gate·xn > 0

    def add(self, gate, pred):
        true = gate > 0
        self.tokens += gate.shape[0]
        self.true_active += int(true.sum())
        self.firing += true.sum(axis=0)
        if pred is not None:
            self.pred_active += int(pred.sum())
            self.both += int((pred & true).sum())
            self.mismatch_outside_ties += int(((pred != true) & (np.abs(gate) >= TIE)).sum())

    @property
    def n_ff(self):
        return self.firing.shape[0]

    @property
    def active_fraction(self):
        return self.true_active / max(1, self.tokens * self.n_ff)

    @property
    def predicted_fraction(self):
        return self.pred_active / max(1, self.tokens * self.n_ff)

    @property
    def recall(self):
        return self.both / self.true_active if self.true_active else 1.0

    @property
    def precision(self):
        return self.both / self.pred_active if self.pred_active else 1.0

    def top_share(self, fraction=0.1):
        """Share of all firings made by the most frequently firing `fraction` of neurons."""
        total = self.firing.sum()
        if total == 0:
            return 0.0
        k = max(1, int(round(fraction * self.n_ff)))
        return float(np.sort(self.firing)[::-1][:k].sum() / total)


class Model:
    def __init__(self, path, activation="auto", use_predictor=True, threshold=None):
        f = gguf_lite.GGUFFile(path)
        self.file = f
        arch = f.get("general.architecture")
        if arch not in ("llama", "bamboo"):
            raise ValueError(f"{path}: architecture {arch!r} is not llama or bamboo")
        self.arch = arch
        self.n_embd = int(f.get(f"{arch}.embedding_length"))
        self.n_layer = int(f.get(f"{arch}.block_count"))
        self.n_ff = int(f.get(f"{arch}.feed_forward_length"))
        self.n_head = int(f.get(f"{arch}.attention.head_count"))
        self.n_head_kv = int(f.get(f"{arch}.attention.head_count_kv", self.n_head))
        self.eps = float(f.get(f"{arch}.attention.layer_norm_rms_epsilon"))
        self.head_dim = self.n_embd // self.n_head
        self.n_rot = int(f.get(f"{arch}.rope.dimension_count", self.head_dim))
        if self.n_rot != self.head_dim:
            raise ValueError(f"{path}: rope.dimension_count {self.n_rot} != head_dim")
        self.rope_base = float(f.get(f"{arch}.rope.freq_base", 10000.0))
        factor = float(f.get(f"{arch}.rope.scaling.factor", f.get(f"{arch}.rope.scale_linear", 0.0)))
        self.freq_scale = 1.0 / factor if factor else 1.0
        self.sparse = f.sparse and use_predictor
        self.threshold = float(f.get("powerinfer.sparse_threshold", 0.0)) if threshold is None \
            else float(threshold)
        if activation == "auto":
            relu = f.sparse or f.get("powerinfer.ffn_activation") == "relu"
            activation = "relu" if relu else "silu"
        self.activation = activation

        self.tok_embd = _f64(f.tensor("token_embd.weight"))
        self.n_vocab = self.tok_embd.shape[0]
        self.output_norm = _f64(f.tensor("output_norm.weight"))
        self.output = _f64(f.tensor("output.weight"))
        self.layers = []
        for i in range(self.n_layer):
            p = f"blk.{i}."
            t = lambda name: _f64(f.tensor(p + name + ".weight"))  # noqa: E731
            layer = {k: t(k) for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                        "ffn_norm", "ffn_gate", "ffn_up")}
            if f.sparse:
                layer["down_t"] = t("ffn_down_t")
                layer["fc1"] = t("fc1")
                layer["fc2"] = t("fc2")
            else:
                layer["down_t"] = t("ffn_down").T
            self.layers.append(layer)

    def rms_norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x: [T, heads, head_dim]; mode 0 rotates the adjacent pairs (2i, 2i+1)."""
        half = self.head_dim // 2
        inv = self.rope_base ** (-2.0 * np.arange(half) / self.head_dim)
        theta = (pos[:, None] * self.freq_scale) * inv[None, :]          # [T, half]
        cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def attention(self, layer, a, pos):
        T = a.shape[0]
        q = (a @ layer["attn_q"].T).reshape(T, self.n_head, self.head_dim)
        k = (a @ layer["attn_k"].T).reshape(T, self.n_head_kv, self.head_dim)
        v = (a @ layer["attn_v"].T).reshape(T, self.n_head_kv, self.head_dim)
        q, k = self.rope(q, pos), self.rope(k, pos)
        group = self.n_head // self.n_head_kv
        k = np.repeat(k, group, axis=1)
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.head_dim)
        mask = pos[None, :, None] < pos[None, None, :]           # key after query
        scores = np.where(mask, -np.inf, scores)
        scores -= scores.max(axis=-1, keepdims=True)
        w = np.exp(scores)
        w /= w.sum(axis=-1, keepdims=True)
        out = np.einsum("hts,shd->thd", w, v).reshape(T, self.n_embd)
        return out @ layer["attn_output"].T

    def ffn(self, layer, h, audit):
        xn = self.rms_norm(h, layer["ffn_norm"])
        gate = xn @ layer["ffn_gate"].T
        up = xn @ layer["ffn_up"].T
        pred = None
        if self.file.sparse:
            score = np.maximum(h @ layer["fc1"].T, 0.0) @ layer["fc2"].T
            pred = score >= self.threshold
        if audit is not None:
            audit.add(gate, pred)
        if self.activation == "relu":
            act = np.maximum(gate, 0.0) * (np.maximum(up, 0.0) if self.arch == "bamboo" else up)
        else:
            act = gate / (1.0 + np.exp(-gate)) * up
        if self.sparse:
            act = np.where(pred, act, 0.0)
        return act @ layer["down_t"]

    def forward(self, tokens, audits=None):
        """Logits [T, n_vocab] (float64) of every position of one sequence starting at 0."""
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError("tokens must be a non-empty list")
        if tokens.min() < 0 or tokens.max() >= self.n_vocab:
            raise ValueError(f"token ids must be in [0, {self.n_vocab})")
        pos = np.arange(tokens.size, dtype=np.float64)
        h = self.tok_embd[tokens]
        for i, layer in enumerate(self.layers):
            h = h + self.attention(layer, self.rms_norm(h, layer["attn_norm"]), pos)
            h = h + self.ffn(layer, h, audits[i] if audits is not None else None)
        return self.rms_norm(h, self.output_norm) @ self.output.T

    def audit(self, tokens):
        audits = [LayerAudit(self.n_ff) for _ in self.layers]
        logits = self.forward(tokens, audits)
        return audits, logits


def parse_tokens(text):
    return [int(t) for t in text.replace(" ", "").split(",") if t]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", help="comma-separated token ids")
    src.add_argument("--random-tokens", type=int, metavar="N", help="N random token ids")
    ap.add_argument("--seed", type=int, default=0, help="seed of --random-tokens")
    ap.add_argument("--out", help="write logits of every position (float32 [T, V]) as .npy")
    ap.add_argument("--audit", action="store_true",
                    help="print per-layer active fraction, skew and predictor recall/precision")
    ap.add_argument("--activation", choices=("auto", "relu", "silu"), default="auto",
                    help="FFN activation of dense files (auto: from the file)")
    ap.add_argument("--dense", action="store_true", help="ignore the predictor of sparse files")
    ap.add_argument("--threshold", type=float, help="override powerinfer.sparse_threshold")
    args = ap.parse_args(argv)

    model = Model(args.model, args.activation, not args.dense, args.threshold)
    if args.tokens is not None:
        tokens = parse_tokens(args.tokens)
    else:
        tokens = np.random.default_rng(args.seed).integers(0, model.n_vocab, args.random_tokens)
    audits, logits = model.audit(tokens)
    if args.out:
        np.save(args.out, logits.astype(np.float32))
    if args.audit:
        print(f"{args.model}: {model.arch} {'sparse' if model.file.sparse else 'dense'} "
              f"n_embd {model.n_embd} n_ff {model.n_ff} layers {model.n_layer} "
              f"tokens {len(tokens)}")
        for i, a in enumerate(audits):
            line = (f"layer {i:3d}: inactive {1 - a.active_fraction:.4f} "
                    f"top10% share {a.top_share(0.1):.3f} "
                    f"never fired {(a.firing == 0).mean():.3f}")
            if model.file.sparse:
                line += (f" predicted-active {a.predicted_fraction:.4f} recall {a.recall:.4f} "
                         f"precision {a.precision:.4f} mismatches {a.mismatch_outside_ties}")
            print(line)
        total = sum(a.tokens * a.n_ff for a in audits)
        inactive = 1 - sum(a.true_active for a in audits) / total
        print(f"all layers: inactive {inactive:.4f} "
              f"top10% share {np.mean([a.top_share(0.1) for a in audits]):.3f}")
        flat = logits.ravel()
        greedy = logits.argmax(axis=-1)
        print(f"logits: std {flat.std():.3f} max|.| {np.abs(flat).max():.3f} "
              f"finite {bool(np.isfinite(flat).all())} distinct greedy {len(set(greedy.tolist()))}"
              f"/{len(greedy)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
