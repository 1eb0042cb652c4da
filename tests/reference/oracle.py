"""Plain NumPy forward pass of PowerInfer GGUF files (llama, bamboo, falcon, opt): the reference
for the engine.

Semantics follow docs/forward-pass.md:
  llama/bamboo: RMSNorm, RoPE mode 0 (adjacent pairs), grouped-query causal attention;
  falcon: LayerNorm with bias, a parallel block (attention and FFN both read the layer input),
      the fused attn_qkv (all Q heads, then K heads, then V heads), NeoX RoPE, the optional
      attn_norm_2 (Falcon-40B's ln_attn) for the attention's input;
  opt: learned positions (row pos + 2 of position_embd), pre-LayerNorm blocks with biases on
      every projection, no RoPE, the output tied to token_embd when the file has no output.
The FFN is either
  sparse (PWRI file): neuron i of token t is computed iff fc2·relu(fc1·x_t) >= threshold, where
      x_t is the residual before ffn_norm (llama, bamboo, opt) or the layer input (falcon);
      a = relu(gate·xn)⊙(up·xn) for llama, relu(gate·xn)⊙relu(up·xn) for bamboo,
      relu(up·xn + b_up) for falcon and opt (b_up: opt's ffn_up.bias);
      y = Σ_active a_i · ffn_down_t[i] (+ opt's ffn_down_t.bias)
  dense (GGUF file): ffn_down · act (+ opt's ffn_down.bias), where act for llama is the ReLU
      form above when the file says powerinfer.ffn_activation = "relu" and SwiGLU
      silu(gate·xn)⊙(up·xn) otherwise; the other families are always ReLU.
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
ARCHS = ("llama", "bamboo", "falcon", "opt")
OPT_POS_OFFSET = 2  # OPT's position p reads row p + 2 of position_embd


def _f64(a):
    return np.asarray(a, dtype=np.float64)


class LayerAudit:
    """Per-layer counts over all tokens of a forward pass."""

    def __init__(self, n_ff):
        self.tokens = 0
        self.true_active = 0       # pre > 0 (gate·xn, or up·xn + b without a gate)
        self.pred_active = 0       # predictor score >= threshold
        self.both = 0
        self.mismatch_outside_ties = 0
        self.firing = np.zeros(n_ff, dtype=np.int64)  # per-neuron count of pre > 0

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
        if arch not in ARCHS:
            raise ValueError(f"{path}: architecture {arch!r} is not one of {', '.join(ARCHS)}")
        self.arch = arch
        self.n_embd = int(f.get(f"{arch}.embedding_length"))
        self.n_layer = int(f.get(f"{arch}.block_count"))
        self.n_ff = int(f.get(f"{arch}.feed_forward_length"))
        self.n_head = int(f.get(f"{arch}.attention.head_count"))
        self.n_head_kv = int(f.get(f"{arch}.attention.head_count_kv", self.n_head))
        self.head_dim = self.n_embd // self.n_head
        self.n_embd_kv = self.head_dim * self.n_head_kv
        if arch in ("llama", "bamboo"):
            self.eps = float(f.get(f"{arch}.attention.layer_norm_rms_epsilon"))
        else:
            # Hugging Face's 1e-5 when absent (docs/forward-pass.md, "Falcon and OPT").
            self.eps = float(f.get(f"{arch}.attention.layer_norm_epsilon", 1e-5))
        self.n_rot = int(f.get(f"{arch}.rope.dimension_count", self.head_dim))
        if arch in ("llama", "falcon") and self.n_rot != self.head_dim:
            raise ValueError(f"{path}: rope.dimension_count {self.n_rot} != head_dim")
        self.rope_base = float(f.get(f"{arch}.rope.freq_base", 10000.0))
        factor = float(f.get(f"{arch}.rope.scaling.factor", f.get(f"{arch}.rope.scale_linear", 0.0)))
        self.freq_scale = 1.0 / factor if factor else 1.0
        self.gated = arch in ("llama", "bamboo")
        self.sparse = f.sparse and use_predictor
        self.threshold = float(f.get("powerinfer.sparse_threshold", 0.0)) if threshold is None \
            else float(threshold)
        if activation == "auto":
            relu = f.sparse or not self.gated or f.get("powerinfer.ffn_activation") == "relu"
            activation = "relu" if relu else "silu"
        self.activation = activation

        self.tok_embd = _f64(f.tensor("token_embd.weight"))
        self.n_vocab = self.tok_embd.shape[0]
        self.output_norm = self.weight_and_bias("output_norm")
        if "output.weight" in f.tensors:
            self.output = _f64(f.tensor("output.weight"))
        elif arch == "opt":
            self.output = self.tok_embd  # tied, as OPT checkpoints are
        else:
            raise KeyError(f"{path}: no tensor output.weight")
        self.position_embd = _f64(f.tensor("position_embd.weight")) if arch == "opt" else None
        self.layers = [self.load_layer(i) for i in range(self.n_layer)]

    def weight_and_bias(self, name):
        """(weight, bias) of a norm or projection; the bias is zero when the file has none."""
        w = _f64(self.file.tensor(name + ".weight"))
        b = _f64(self.file.tensor(name + ".bias")) if name + ".bias" in self.file.tensors \
            else np.zeros(w.shape[0])
        return w, b

    def load_layer(self, i):
        f = self.file
        p = f"blk.{i}."
        t = lambda name: _f64(f.tensor(p + name + ".weight"))  # noqa: E731
        layer = {}
        if self.arch in ("llama", "bamboo"):
            layer.update({k: t(k) for k in ("attn_norm", "attn_q", "attn_k", "attn_v",
                                             "attn_output", "ffn_norm", "ffn_gate", "ffn_up")})
        elif self.arch == "falcon":
            layer["attn_norm"] = self.weight_and_bias(p + "attn_norm")
            if p + "attn_norm_2.weight" in f.tensors:
                layer["attn_norm_2"] = self.weight_and_bias(p + "attn_norm_2")
            qkv = t("attn_qkv")
            if qkv.shape != (self.n_embd + 2 * self.n_embd_kv, self.n_embd):
                raise ValueError(f"{f.path}: {p}attn_qkv has shape {qkv.shape}")
            d, kv = self.n_embd, self.n_embd_kv
            layer["attn_q"], layer["attn_k"], layer["attn_v"] = qkv[:d], qkv[d:d + kv], qkv[d + kv:]
            layer["attn_output"] = t("attn_output")
            layer["ffn_up"] = t("ffn_up")
        else:  # opt
            for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                      "ffn_up"):
                layer[k], layer[k + "_b"] = self.weight_and_bias(p + k)
        down = "ffn_down_t" if f.sparse else "ffn_down"
        layer["down_t"] = t(down) if f.sparse else t(down).T
        if self.arch == "opt":
            layer["down_b"] = self.weight_and_bias(p + down)[1]
        if f.sparse:
            layer["fc1"] = t("fc1")
            layer["fc2"] = t("fc2")
        return layer

    def rms_norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def layer_norm(self, x, wb):
        """(x − mean) / sqrt(var + eps) · w + b, biased variance."""
        w, b = wb
        c = x - x.mean(axis=-1, keepdims=True)
        return c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + self.eps) * w + b

    def rope_angles(self, pos):
        half = self.n_rot // 2
        inv = self.rope_base ** (-2.0 * np.arange(half) / self.n_rot)
        theta = (pos[:, None] * self.freq_scale) * inv[None, :]          # [T, half]
        return np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]

    def rope(self, x, pos):
        """x: [T, heads, head_dim]; mode 0 rotates the adjacent pairs (2i, 2i+1)."""
        cos, sin = self.rope_angles(pos)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def rope_neox(self, x, pos):
        """x: [T, heads, head_dim]; NeoX mode rotates the pairs (j, j + n_rot/2), j < n_rot/2;
        dimensions from n_rot on are left as they are."""
        cos, sin = self.rope_angles(pos)
        half = self.n_rot // 2
        x0, x1 = x[..., :half], x[..., half:self.n_rot]
        out = x.copy()
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:self.n_rot] = x0 * sin + x1 * cos
        return out

    def attend(self, q, k, v, pos):
        """Causal grouped-query attention; q [T, n_head, hd], k/v [T, n_head_kv, hd] (RoPE
        already applied). Returns the heads side by side, [T, n_embd]."""
        T = q.shape[0]
        group = self.n_head // self.n_head_kv
        k = np.repeat(k, group, axis=1)
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.head_dim)
        mask = pos[None, :, None] < pos[None, None, :]           # key after query
        scores = np.where(mask, -np.inf, scores)
        scores -= scores.max(axis=-1, keepdims=True)
        w = np.exp(scores)
        w /= w.sum(axis=-1, keepdims=True)
        return np.einsum("hts,shd->thd", w, v).reshape(T, self.n_embd)

    def heads(self, x, n):
        return x.reshape(x.shape[0], n, self.head_dim)

    def attention(self, layer, a, pos):
        """llama/bamboo: RoPE mode 0, no biases."""
        q = self.heads(a @ layer["attn_q"].T, self.n_head)
        k = self.heads(a @ layer["attn_k"].T, self.n_head_kv)
        v = self.heads(a @ layer["attn_v"].T, self.n_head_kv)
        q, k = self.rope(q, pos), self.rope(k, pos)
        return self.attend(q, k, v, pos) @ layer["attn_output"].T

    def ffn(self, layer, xn, pred_input, audit):
        """The FFN's addition to the residual for the normalised input xn; the predictor (sparse
        files) reads pred_input. The sign of `pre` (the gate, or up·xn + b for the gate-less
        families) is what the predictor predicts."""
        up = xn @ layer["ffn_up"].T
        if self.gated:
            pre = xn @ layer["ffn_gate"].T
        else:
            up = up + layer.get("ffn_up_b", 0.0)
            pre = up
        pred = None
        if self.file.sparse:
            score = np.maximum(pred_input @ layer["fc1"].T, 0.0) @ layer["fc2"].T
            pred = score >= self.threshold
        if audit is not None:
            audit.add(pre, pred)
        if not self.gated:
            act = np.maximum(up, 0.0)
        elif self.activation == "relu":
            act = np.maximum(pre, 0.0) * (np.maximum(up, 0.0) if self.arch == "bamboo" else up)
        else:
            act = pre / (1.0 + np.exp(-pre)) * up
        if self.sparse:
            act = np.where(pred, act, 0.0)
        return act @ layer["down_t"] + layer.get("down_b", 0.0)

    def check_tokens(self, tokens):
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError("tokens must be a non-empty list")
        if tokens.min() < 0 or tokens.max() >= self.n_vocab:
            raise ValueError(f"token ids must be in [0, {self.n_vocab})")
        if self.position_embd is not None and tokens.size > self.position_embd.shape[0] - OPT_POS_OFFSET:
            raise ValueError(f"opt: at most {self.position_embd.shape[0] - OPT_POS_OFFSET} "
                             "positions (position_embd rows - 2)")
        return tokens

    def forward(self, tokens, audits=None):
        """Logits [T, n_vocab] (float64) of every position of one sequence starting at 0."""
        tokens = self.check_tokens(tokens)
        pos = np.arange(tokens.size, dtype=np.float64)
        audit = (lambda i: audits[i]) if audits is not None else (lambda i: None)
        h = self.tok_embd[tokens]
        if self.arch in ("llama", "bamboo"):
            for i, layer in enumerate(self.layers):
                h = h + self.attention(layer, self.rms_norm(h, layer["attn_norm"]), pos)
                h = h + self.ffn(layer, self.rms_norm(h, layer["ffn_norm"]), h, audit(i))
            return self.rms_norm(h, self.output_norm[0]) @ self.output.T
        if self.arch == "falcon":
            for i, layer in enumerate(self.layers):
                h = self.falcon_block(layer, h, pos, audit(i))
        else:
            h = h + self.position_embd[np.arange(tokens.size) + OPT_POS_OFFSET]
            for i, layer in enumerate(self.layers):
                h = self.opt_block(layer, h, pos, audit(i))
        return self.layer_norm(h, self.output_norm) @ self.output.T

    def falcon_block(self, layer, h, pos, audit):
        """Parallel block: attention and FFN both read the layer input h."""
        an = self.layer_norm(h, layer["attn_norm"])
        ac = self.layer_norm(h, layer["attn_norm_2"]) if "attn_norm_2" in layer else an
        q = self.rope_neox(self.heads(ac @ layer["attn_q"].T, self.n_head), pos)
        k = self.rope_neox(self.heads(ac @ layer["attn_k"].T, self.n_head_kv), pos)
        v = self.heads(ac @ layer["attn_v"].T, self.n_head_kv)
        attn = self.attend(q, k, v, pos) @ layer["attn_output"].T
        return h + attn + self.ffn(layer, an, h, audit)

    def opt_block(self, layer, h, pos, audit):
        """Pre-LayerNorm block with biases on every projection, no RoPE."""
        a = self.layer_norm(h, (layer["attn_norm"], layer["attn_norm_b"]))
        q = self.heads(a @ layer["attn_q"].T + layer["attn_q_b"], self.n_head)
        k = self.heads(a @ layer["attn_k"].T + layer["attn_k_b"], self.n_head_kv)
        v = self.heads(a @ layer["attn_v"].T + layer["attn_v_b"], self.n_head_kv)
        h = h + self.attend(q, k, v, pos) @ layer["attn_output"].T + layer["attn_output_b"]
        xn = self.layer_norm(h, (layer["ffn_norm"], layer["ffn_norm_b"]))
        return h + self.ffn(layer, xn, h, audit)

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
                    help="print per-layer active fraction, skew and predictor recall/precision "
                         "against the sign of the activation's argument (gate or up + b)")
    ap.add_argument("--activation", choices=("auto", "relu", "silu"), default="auto",
                    help="FFN activation of dense files (auto: from the file)")
    ap.add_argument("--dense", action="store_true", help="ignore the predictor of sparse files")
    ap.add_argument("--threshold", type=float, help="override powerinfer.sparse_threshold")
    args = ap.parse_args(argv)

    try:
        model = Model(args.model, args.activation, not args.dense, args.threshold)
        if args.tokens is not None:
            tokens = parse_tokens(args.tokens)
        else:
            tokens = np.random.default_rng(args.seed).integers(0, model.n_vocab,
                                                               args.random_tokens)
        audits, logits = model.audit(tokens)
    except (ValueError, KeyError, OSError) as e:
        print(f"oracle.py: {e}", file=sys.stderr)
        return 1
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
