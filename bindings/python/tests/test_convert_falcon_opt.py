"""powerinfer-convert on Falcon and OPT checkpoints: the golden folders that
scripts/make_convert_goldens.py made with transformers (tests/data/convert-goldens), and Falcon
variants built here with NumPy. Every output tensor is checked against the checkpoint after the
documented operation (Falcon's fused QKV against Hugging Face's own reading of its heads), the
metadata and vocabulary against config.json and the tokenizer files, the refusals by their
message, and the engine's logits on the converted files against transformers' within 1e-3 of
the largest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import powerinfer
from powerinfer.convert import convert, main

from convert_fixtures import GOLDEN_NAMES, Golden, copy_golden, engine_falcon_heads, gguf_forward, hf_falcon_heads, load_golden, make_falcon_folder, read_gguf, write_safetensors

FALCON = ("falcon-mq", "falcon-gqa")


def falcon_dims(c: dict[str, Any]) -> tuple[int, int, int, str]:
    n_head = c["num_attention_heads"]
    if c.get("new_decoder_architecture"):
        return n_head, c["num_kv_heads"], c["hidden_size"] // n_head, "new"
    if c.get("multi_query", True):
        return n_head, 1, c["hidden_size"] // n_head, "mq"
    return n_head, n_head, c["hidden_size"] // n_head, "mha"


def expected_falcon(c: dict[str, Any], w: dict[str, np.ndarray], predictor: dict[int, tuple[np.ndarray, np.ndarray]], dense: bool) -> dict[str, np.ndarray]:
    """Every tensor but attn_qkv, whose rows check_falcon_qkv checks."""
    emb = w["transformer.word_embeddings.weight"]
    out = {"token_embd.weight": emb, "output_norm.weight": w["transformer.ln_f.weight"], "output_norm.bias": w["transformer.ln_f.bias"]}
    out["output.weight"] = emb if c.get("tie_word_embeddings", True) else w["lm_head.weight"]
    two_norms = c.get("new_decoder_architecture") and c.get("num_ln_in_parallel_attn") != 1
    for il in range(c["num_hidden_layers"]):
        p, b = f"transformer.h.{il}.", f"blk.{il}."
        ffn_norm = "ln_mlp" if two_norms else "input_layernorm"
        out[b + "attn_norm.weight"], out[b + "attn_norm.bias"] = w[p + ffn_norm + ".weight"], w[p + ffn_norm + ".bias"]
        if two_norms:
            out[b + "attn_norm_2.weight"], out[b + "attn_norm_2.bias"] = w[p + "ln_attn.weight"], w[p + "ln_attn.bias"]
        out[b + "attn_output.weight"] = w[p + "self_attention.dense.weight"]
        out[b + "ffn_up.weight"] = w[p + "mlp.dense_h_to_4h.weight"]
        down = w[p + "mlp.dense_4h_to_h.weight"]
        if dense:
            out[b + "ffn_down.weight"] = down
        else:
            out[b + "ffn_down_t.weight"] = down.T
            out[b + "fc1.weight"], out[b + "fc2.weight"] = predictor[il]
    return out


def check_tensors(path: Path, want: dict[str, np.ndarray], f16: bool, also: tuple[str, ...] = ()) -> None:
    g = read_gguf(path)
    assert set(g.tensors) == set(want) | set(also)
    for name, value in want.items():
        kind, ne, off = g.tensors[name]
        assert off % 32 == 0, name
        assert ne == tuple(reversed(value.shape)), name
        two_d = value.ndim == 2
        assert kind == (1 if f16 and two_d else 0), name
        expected = value.astype(np.float16) if f16 and two_d else value.astype(np.float32)
        np.testing.assert_array_equal(g.array(name), expected, err_msg=name)


def check_falcon_qkv(path: Path, c: dict[str, Any], w: dict[str, np.ndarray]) -> None:
    g = read_gguf(path)
    n_head, n_kv, hd, variant = falcon_dims(c)
    d = c["hidden_size"]
    for il in range(c["num_hidden_layers"]):
        kind, ne, _ = g.tensors[f"blk.{il}.attn_qkv.weight"]
        assert ne == (d, d + 2 * n_kv * hd)
        got = engine_falcon_heads(g.array(f"blk.{il}.attn_qkv.weight").astype(np.float32), n_head, n_kv, hd)
        want = hf_falcon_heads(w[f"transformer.h.{il}.self_attention.query_key_value.weight"], n_head, n_kv, hd, variant)
        for part, a, b in zip("qkv", got, want):
            np.testing.assert_array_equal(a, b.astype(a.dtype), err_msg=f"layer {il} {part}")


def expected_opt(c: dict[str, Any], w: dict[str, np.ndarray], predictor: dict[int, tuple[np.ndarray, np.ndarray]], dense: bool, p: str = "model.decoder.") -> dict[str, np.ndarray]:
    out = {"token_embd.weight": w[p + "embed_tokens.weight"], "position_embd.weight": w[p + "embed_positions.weight"],
           "output_norm.weight": w[p + "final_layer_norm.weight"], "output_norm.bias": w[p + "final_layer_norm.bias"]}
    pairs = [("attn_norm", "self_attn_layer_norm"), ("attn_q", "self_attn.q_proj"), ("attn_k", "self_attn.k_proj"), ("attn_v", "self_attn.v_proj"),
             ("attn_output", "self_attn.out_proj"), ("ffn_norm", "final_layer_norm"), ("ffn_up", "fc1")]
    for il in range(c["num_hidden_layers"]):
        hf, b = f"{p}layers.{il}.", f"blk.{il}."
        for ours, theirs in pairs:
            out[f"{b}{ours}.weight"], out[f"{b}{ours}.bias"] = w[f"{hf}{theirs}.weight"], w[f"{hf}{theirs}.bias"]
        down = "ffn_down" if dense else "ffn_down_t"
        out[f"{b}{down}.weight"] = w[hf + "fc2.weight"] if dense else w[hf + "fc2.weight"].T
        out[f"{b}{down}.bias"] = w[hf + "fc2.bias"]
        if not dense:
            out[b + "fc1.weight"], out[b + "fc2.weight"] = predictor[il]
    return out


def tokenizer_json(g: Golden) -> dict[str, Any]:
    return json.loads((g.folder / "tokenizer.json").read_text())


def check_vocab(m: dict[str, Any], g: Golden) -> None:
    tj = tokenizer_json(g)
    vocab = tj["model"]["vocab"]
    pieces = sorted(vocab, key=vocab.get)
    n_vocab = g.config["vocab_size"]
    assert m["tokenizer.ggml.model"] == "gpt2"
    assert "tokenizer.ggml.scores" not in m  # byte-level BPE ranks merges, it scores no token
    assert m["tokenizer.ggml.tokens"][: len(pieces)] == pieces
    assert m["tokenizer.ggml.tokens"][len(pieces) :] == [f"[PAD{i}]" for i in range(len(pieces), n_vocab)]
    merges = [" ".join(mm) if isinstance(mm, list) else mm for mm in tj["model"]["merges"]]
    assert m["tokenizer.ggml.merges"] == merges and merges
    specials = {t["id"] for t in tj["added_tokens"] if t["special"]}
    want_types = [3 if i in specials else 1 for i in range(len(pieces))] + [5] * (n_vocab - len(pieces))
    assert m["tokenizer.ggml.token_type"] == want_types


@pytest.mark.parametrize("name", FALCON)
@pytest.mark.parametrize("dense", [False, True])
def test_falcon_every_tensor_and_metadata(tmp_path: Path, name: str, dense: bool) -> None:
    g = load_golden(name)
    out = convert(g.folder, g.predictor_dir, outfile=tmp_path / "f.gguf", outtype="f32", dense=dense)
    f = read_gguf(out)
    assert f.magic == (b"GGUF" if dense else b"PWRI")
    check_tensors(out, expected_falcon(g.config, g.weights, g.predictor, dense), f16=False, also=tuple(f"blk.{il}.attn_qkv.weight" for il in range(2)))
    check_falcon_qkv(out, g.config, g.weights)
    order = list(f.tensors)
    assert order[:4] == ["token_embd.weight", "output_norm.weight", "output_norm.bias", "output.weight"]
    c, m = g.config, f.metadata
    n_head, n_kv, hd, _ = falcon_dims(c)
    assert m["general.architecture"] == "falcon"
    assert m["falcon.context_length"] == c["max_position_embeddings"] == 128
    assert m["falcon.embedding_length"] == 64 and m["falcon.block_count"] == 2
    assert m["falcon.feed_forward_length"] == (c.get("ffn_hidden_size") or 256)
    assert (m["falcon.attention.head_count"], m["falcon.attention.head_count_kv"]) == (n_head, n_kv)
    assert m["falcon.attention.layer_norm_epsilon"] == pytest.approx(c["layer_norm_epsilon"])
    assert m["falcon.tensor_data_layout"] == "jploski"
    assert m["falcon.rope.dimension_count"] == hd and m["falcon.rope.freq_base"] == pytest.approx(10000.0)
    assert "falcon.attention.layer_norm_rms_epsilon" not in m and "powerinfer.ffn_activation" not in m
    assert ("powerinfer.sparse_threshold" in m) == (not dense)
    check_vocab(m, g)
    eos = tokenizer_json(g)["model"]["vocab"]["<|endoftext|>"]
    assert m["tokenizer.ggml.pre"] == "falcon"
    assert (m["tokenizer.ggml.bos_token_id"], m["tokenizer.ggml.eos_token_id"]) == (eos, eos) == (c["bos_token_id"], c["eos_token_id"])
    assert m["tokenizer.ggml.add_bos_token"] is False and m["tokenizer.ggml.add_eos_token"] is False


def test_falcon_variants_layouts(tmp_path: Path) -> None:
    """7B-style multi-query needs no reordering, so its QKV bytes are the checkpoint's; the
    40B-style grouped one has none of its K/V rows where Hugging Face keeps them."""
    mq, gqa = load_golden("falcon-mq"), load_golden("falcon-gqa")
    a = read_gguf(convert(mq.folder, dense=True, outfile=tmp_path / "mq.gguf", outtype="f32"))
    np.testing.assert_array_equal(a.array("blk.0.attn_qkv.weight"), mq.weights["transformer.h.0.self_attention.query_key_value.weight"])
    b = read_gguf(convert(gqa.folder, dense=True, outfile=tmp_path / "gqa.gguf", outtype="f32"))
    src = gqa.weights["transformer.h.0.self_attention.query_key_value.weight"]
    got = b.array("blk.0.attn_qkv.weight")
    assert not np.array_equal(got, src)
    assert sorted(map(bytes, got)) == sorted(map(bytes, src))  # a permutation of the rows


@pytest.mark.parametrize(
    "extra,variant",
    [
        ({"multi_query": False}, "mha"),  # every query head with its own K and V: (q, k, v) per head
        ({"new_decoder_architecture": True, "num_kv_heads": 4}, "new"),  # grouped, two queries per KV head
        ({"new_decoder_architecture": True, "num_kv_heads": 1}, "new"),  # new architecture, one group
        ({"new_decoder_architecture": True, "num_kv_heads": 8, "num_ln_in_parallel_attn": 1}, "new"),  # one norm
    ],
)
def test_falcon_qkv_of_every_head_layout(tmp_path: Path, extra: dict[str, Any], variant: str) -> None:
    config = {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "vocab_size": 320, "hidden_size": 64, "num_attention_heads": 8,
              "num_hidden_layers": 2, "activation": "relu", "bias": False, "alibi": False, "parallel_attn": True, "bos_token_id": 11, "eos_token_id": 11, **extra}
    w = make_falcon_folder(tmp_path / "m", config)
    out = convert(tmp_path / "m", dense=True, outfile=tmp_path / "o.gguf", outtype="f32")
    assert falcon_dims(config)[3] == variant
    check_falcon_qkv(out, config, w)
    check_tensors(out, expected_falcon(config, w, {}, dense=True), f16=False, also=("blk.0.attn_qkv.weight", "blk.1.attn_qkv.weight"))
    m = read_gguf(out).metadata
    assert m["falcon.attention.head_count_kv"] == falcon_dims(config)[1]
    assert m["falcon.context_length"] == 2048  # the config has no max_position_embeddings


def test_falcon_old_custom_code_config(tmp_path: Path) -> None:
    """RWForCausalLM configs (before Falcon was in transformers) name the keys n_head, n_layer,
    n_head_kv; model_type RefinedWeb is the 40B code (new decoder architecture)."""
    old = {"architectures": ["RWForCausalLM"], "model_type": "RefinedWeb", "vocab_size": 320, "hidden_size": 64, "n_head": 8, "n_head_kv": 2, "n_layer": 2,
           "activation": "relu", "bias": False, "alibi": False, "parallel_attn": True, "bos_token_id": 11, "eos_token_id": 11}
    new = {"new_decoder_architecture": True, "num_attention_heads": 8, "num_kv_heads": 2, "num_hidden_layers": 2, "hidden_size": 64}
    w = make_falcon_folder(tmp_path / "m", {**old, **new})
    (tmp_path / "m" / "config.json").write_text(json.dumps(old))
    out = convert(tmp_path / "m", dense=True, outfile=tmp_path / "o.gguf", outtype="f32")
    check_falcon_qkv(out, {**old, **new}, w)
    assert "blk.1.attn_norm_2.weight" in read_gguf(out).tensors
    seven = {**old, "model_type": "RefinedWebModel", "multi_query": True}
    del seven["n_head_kv"]
    w = make_falcon_folder(tmp_path / "m7", {**seven, "num_attention_heads": 8, "num_hidden_layers": 2})
    (tmp_path / "m7" / "config.json").write_text(json.dumps(seven))
    out = convert(tmp_path / "m7", dense=True, outfile=tmp_path / "o7.gguf", outtype="f32")
    assert read_gguf(out).metadata["falcon.attention.head_count_kv"] == 1


@pytest.mark.parametrize("dense", [False, True])
def test_opt_every_tensor_and_metadata(tmp_path: Path, dense: bool) -> None:
    g = load_golden("opt")
    out = convert(g.folder, g.predictor_dir, outfile=tmp_path / "o.gguf", outtype="f32", dense=dense)
    f = read_gguf(out)
    assert f.magic == (b"GGUF" if dense else b"PWRI")
    want = expected_opt(g.config, g.weights, g.predictor, dense)
    check_tensors(out, want, f16=False)
    assert "output.weight" not in f.tensors  # tied: the engine reads token_embd
    c = g.config
    assert f.tensors["position_embd.weight"][1] == (64, c["max_position_embeddings"] + 2)
    sparse_bias = f.tensors.get("blk.0.ffn_down_t.bias")
    assert dense or sparse_bias[1] == (64,)
    m = f.metadata
    assert m["general.architecture"] == "opt"
    assert (m["opt.context_length"], m["opt.embedding_length"], m["opt.block_count"], m["opt.feed_forward_length"]) == (64, 64, 2, 128)
    assert (m["opt.attention.head_count"], m["opt.attention.head_count_kv"]) == (4, 4)
    assert m["opt.attention.layer_norm_epsilon"] == pytest.approx(1e-5)
    assert not [k for k in m if k.startswith("opt.rope")]
    check_vocab(m, g)
    assert m["tokenizer.ggml.pre"] == "gpt-2"
    ids = (m["tokenizer.ggml.bos_token_id"], m["tokenizer.ggml.eos_token_id"], m["tokenizer.ggml.padding_token_id"], m["tokenizer.ggml.unknown_token_id"])
    assert ids == (2, 2, 1, 3)
    assert m["tokenizer.ggml.add_bos_token"] is True and m["tokenizer.ggml.add_eos_token"] is False  # "</s> $A"


def test_opt_decoder_prefix_and_stored_tied_head(tmp_path: Path) -> None:
    """Checkpoints of the bare OPTModel name tensors decoder.*; a stored lm_head of a tied model
    is Hugging Face's copy of the embeddings and is not written."""
    g = copy_golden("opt", tmp_path)
    renamed = {k.removeprefix("model."): v for k, v in g.weights.items()}
    renamed["lm_head.weight"] = g.weights["model.decoder.embed_tokens.weight"]
    write_safetensors(g.folder / "model.safetensors", renamed)
    out = convert(g.folder, g.predictor_dir, outfile=tmp_path / "o.gguf", outtype="f32")
    check_tensors(out, expected_opt(g.config, renamed, g.predictor, False, p="decoder."), f16=False)


def test_opt_untied_output(tmp_path: Path) -> None:
    g = copy_golden("opt", tmp_path)
    c = {**g.config, "tie_word_embeddings": False}
    (g.folder / "config.json").write_text(json.dumps(c))
    lm_head = np.random.default_rng(1).standard_normal((c["vocab_size"], 64)).astype(np.float32)
    write_safetensors(g.folder / "model.safetensors", {**g.weights, "lm_head.weight": lm_head})
    f = read_gguf(convert(g.folder, dense=True, outfile=tmp_path / "o.gguf", outtype="f32"))
    np.testing.assert_array_equal(f.array("output.weight"), lm_head)


def test_opt_vocab_json_and_merges_txt(tmp_path: Path) -> None:
    """GPT2Tokenizer's files (the published OPT folders have no tokenizer.json) give the same
    vocabulary; the special tokens, plain pieces of vocab.json there, become control tokens."""
    g = copy_golden("opt", tmp_path)
    tj = tokenizer_json(g)
    (g.folder / "tokenizer.json").unlink()
    (g.folder / "vocab.json").write_text(json.dumps(tj["model"]["vocab"]))
    merges = [" ".join(mm) if isinstance(mm, list) else mm for mm in tj["model"]["merges"]]
    (g.folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (g.folder / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True, "bos_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}))
    m = read_gguf(convert(g.folder, g.predictor_dir, outfile=tmp_path / "o.gguf", outtype="f32")).metadata
    ref = read_gguf(convert(load_golden("opt").folder, g.predictor_dir, outfile=tmp_path / "r.gguf", outtype="f32")).metadata
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token"):
        assert m[key] == ref[key], key
    types = m["tokenizer.ggml.token_type"]
    assert [types[i] for i in (1, 2, 3)] == [3, 3, 3] and types[0] == 1  # <pad> </s> <unk> named; <s> is not
    assert types[4:] == ref["tokenizer.ggml.token_type"][4:]


def test_f16_and_quantized_outputs(tmp_path: Path) -> None:
    for name in GOLDEN_NAMES:
        g = load_golden(name)
        out = convert(g.folder, g.predictor_dir, outfile=tmp_path / f"{name}.gguf")  # F16
        want = expected_opt(g.config, g.weights, g.predictor, False) if name == "opt" else expected_falcon(g.config, g.weights, g.predictor, False)
        check_tensors(out, want, f16=True, also=() if name == "opt" else ("blk.0.attn_qkv.weight", "blk.1.attn_qkv.weight"))
        q = read_gguf(convert(g.folder, g.predictor_dir, outfile=tmp_path / f"{name}.q4.gguf", outtype="q4_0"))
        assert q.magic == b"PWRI"
        assert q.tensors["blk.0.ffn_up.weight"][0] == 2  # Q4_0
        assert q.tensors["blk.0.attn_norm.bias"][0] == 0  # 1-D stays F32


# ---------------------------------------------------------------- refusals


def run_fails(capsys: pytest.CaptureFixture[str], args: list[str], *needles: str) -> None:
    assert main(["--quiet", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("powerinfer-convert: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err


def edit_config(g: Golden, **changes: Any) -> None:
    c = {**g.config, **changes}
    for k, v in changes.items():
        if v is None:
            del c[k]
    (g.folder / "config.json").write_text(json.dumps(c))


@pytest.mark.parametrize(
    "name,changes,needles",
    [
        ("falcon-mq", {"alibi": True}, ["config.json: alibi: true", "not ALiBi"]),
        ("falcon-mq", {"bias": True}, ["config.json: bias: true", "no biases"]),
        ("falcon-mq", {"parallel_attn": False}, ["config.json: parallel_attn: false", "in parallel"]),
        ("falcon-mq", {"activation": "gelu"}, ["config.json: activation: 'gelu' is not relu", "relu(up*x)"]),
        ("falcon-mq", {"activation": None}, ["config.json: activation: has no activation", "GELU", 'set "activation": "relu"']),
        ("falcon-gqa", {"num_kv_heads": 3}, ["num_kv_heads 3 does not divide num_attention_heads 8"]),
        ("opt", {"do_layer_norm_before": False}, ["config.json: do_layer_norm_before: false", "OPT-350m"]),
        ("opt", {"word_embed_proj_dim": 32}, ["config.json: word_embed_proj_dim: word_embed_proj_dim 32 differs from hidden_size 64", "project_in"]),
        ("opt", {"activation_function": "gelu"}, ["config.json: activation_function: 'gelu' is not relu"]),
        ("opt", {"enable_bias": False}, ["config.json: enable_bias: false"]),
    ],
)
def test_config_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, changes: dict[str, Any], needles: list[str]) -> None:
    g = copy_golden(name, tmp_path)
    edit_config(g, **changes)
    for dense in ([], ["--dense"]):
        run_fails(capsys, [*dense, "--outfile", str(tmp_path / "o.gguf"), str(g.folder), str(g.predictor_dir)], *needles)
    assert not (tmp_path / "o.gguf").exists()


def test_parallel_attn_false_is_fine_for_the_new_architecture(tmp_path: Path) -> None:
    # Hugging Face's new decoder architecture runs attention and FFN in parallel whatever
    # parallel_attn says (its two norms feed them).
    g = copy_golden("falcon-gqa", tmp_path)
    edit_config(g, parallel_attn=False)
    check_falcon_qkv(convert(g.folder, dense=True, outfile=tmp_path / "o.gguf", outtype="f32"), g.config, g.weights)


def test_tensor_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = copy_golden("falcon-gqa", tmp_path)
    w = dict(g.weights)
    del w["transformer.h.1.ln_attn.bias"]
    write_safetensors(g.folder / "model.safetensors", w)
    run_fails(capsys, ["--dense", str(g.folder)], "transformer.h.1.ln_attn.bias: missing from the checkpoint (a Falcon model with 2 layers has it)")
    w = dict(g.weights)
    w["transformer.h.0.self_attention.query_key_value.weight"] = w["transformer.h.0.self_attention.query_key_value.weight"][:-8]
    write_safetensors(g.folder / "model.safetensors", w)
    run_fails(capsys, ["--dense", str(g.folder)], "transformer.h.0.self_attention.query_key_value.weight: shape [88, 64], expected [96, 64]")
    w = {**g.weights, "transformer.h.0.self_attention.query_key_value.bias": np.zeros(96, np.float32)}
    write_safetensors(g.folder / "model.safetensors", w)
    run_fails(capsys, ["--dense", str(g.folder)], "query_key_value.bias: unexpected tensor: not part of a Falcon model")
    o = copy_golden("opt", tmp_path / "o")
    w = dict(o.weights)
    w["model.decoder.embed_positions.weight"] = w["model.decoder.embed_positions.weight"][:-2]
    write_safetensors(o.folder / "model.safetensors", w)
    run_fails(capsys, ["--dense", str(o.folder)], "model.decoder.embed_positions.weight: shape [64, 64], expected [66, 64]")


def test_tokenizer_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = copy_golden("falcon-mq", tmp_path)
    tj = tokenizer_json(g)
    path = g.folder / "tokenizer.json"
    args = ["--dense", str(g.folder)]

    def write(data: dict[str, Any]) -> None:
        path.write_text(json.dumps(data))

    write({**tj, "pre_tokenizer": {"type": "Whitespace"}})
    run_fails(capsys, args, "tokenizer.json: pre_tokenizer: pre-tokenizer (Whitespace) is neither GPT-2's (ByteLevel) nor Falcon's")
    write({**tj, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}})
    run_fails(capsys, args, "add_prefix_space is true")
    write({**tj, "normalizer": {"type": "NFC"}})
    run_fails(capsys, args, "tokenizer.json: normalizer: has a 'NFC' normalizer")
    write({**tj, "model": {**tj["model"], "byte_fallback": True}})
    run_fails(capsys, args, "tokenizer.json: model.type: is a BPE with byte_fallback (SentencePiece-style), not the byte-level BPE")
    bad = dict(tj["model"])
    bad["merges"] = [tj["model"]["merges"][0], "no_such_piece x"]
    write({**tj, "model": bad})
    run_fails(capsys, args, "tokenizer.json: model.merges: merge 1 ('no_such_piece' 'x') needs 'no_such_piece'")
    write({**tj, "added_tokens": [{"id": 5, "content": "<|other|>", "special": True}]})
    run_fails(capsys, args, "added token '<|other|>' has id 5, which the vocabulary gives to")
    path.unlink()
    run_fails(capsys, args, "has no tokenizer.json, nor vocab.json with merges.txt: a Falcon model needs its byte-level BPE tokenizer")


# ---------------------------------------------------------------- the real Falcon vocabulary


def shared_data() -> Path:
    import os

    root = Path(os.environ.get("POWERINFER_TEST_DATA_DIR", Path(__file__).resolve().parents[3] / ".." / "shared" / "data"))
    if not (root / "ggml-vocab-falcon.gguf").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{root}/ggml-vocab-falcon.gguf is missing under CI")
        pytest.skip(f"no shared test data at {root} (set POWERINFER_TEST_DATA_DIR)")
    return root


def test_real_falcon_vocabulary_round_trips(tmp_path: Path) -> None:
    """Falcon's real vocabulary (65024 tokens, 64784 merges), put back into a tokenizer.json,
    converts to exactly the tokens, types, merges and special ids of llama.cpp's own file."""
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(shared_data() / "ggml-vocab-falcon.gguf")

    def strings(key: str) -> list[str]:
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key: str) -> int:
        return int(r.fields[key].parts[r.fields[key].data[0]][0])

    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    g = copy_golden("falcon-mq", tmp_path)
    tj = tokenizer_json(g)
    tj["model"] = {**tj["model"], "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}
    tj["added_tokens"] = [{"id": i, "content": t, "special": True} for i, t in enumerate(tokens) if types[i] == 3]
    (g.folder / "tokenizer.json").write_text(json.dumps(tj))
    (g.folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    n_vocab = len(tokens)
    edit_config(g, vocab_size=n_vocab, bos_token_id=11, eos_token_id=11)
    w = dict(g.weights)
    w["transformer.word_embeddings.weight"] = np.zeros((n_vocab, 64), np.float16)
    write_safetensors(g.folder / "model.safetensors", w)
    m = read_gguf(convert(g.folder, dense=True, outfile=tmp_path / "o.gguf")).metadata
    assert m["tokenizer.ggml.tokens"] == tokens
    assert m["tokenizer.ggml.token_type"] == types
    assert m["tokenizer.ggml.merges"] == merges
    assert m["tokenizer.ggml.model"] == "gpt2" and m["tokenizer.ggml.pre"] == strings("tokenizer.ggml.pre")[0] == "falcon"
    assert (m["tokenizer.ggml.bos_token_id"], m["tokenizer.ggml.eos_token_id"]) == (scalar("tokenizer.ggml.bos_token_id"), scalar("tokenizer.ggml.eos_token_id"))
    assert "tokenizer.ggml.scores" not in m and "tokenizer.ggml.scores" not in r.fields


# ---------------------------------------------------------------- the engine against transformers


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    err = float(np.abs(got - want).max())
    assert err <= 1e-3 * float(np.abs(want).max()), f"{what}: max |diff| {err} vs max |logit| {np.abs(want).max()}"


def engine_logits_per_position(path: Path, tokens: list[int], **model_args: Any) -> tuple[np.ndarray, np.ndarray]:
    """(logits after each token fed one at a time, logits of the last token of one batch)."""
    with powerinfer.Model(path, n_threads=2, **model_args) as model:
        with model.create_context(n_ctx=64) as ctx:
            steps = np.stack([ctx.eval([t]).copy() for t in tokens])
        with model.create_context(n_ctx=64) as ctx:
            batch = ctx.eval(tokens).copy()
    return steps, batch


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_engine_dense_logits_equal_transformers(tmp_path: Path, name: str) -> None:
    g = load_golden(name)
    out = convert(g.folder, dense=True, outfile=tmp_path / "d.gguf", outtype="f32")
    steps, batch = engine_logits_per_position(out, g.tokens)
    for pos in range(len(g.tokens)):
        assert_close(steps[pos], g.logits[pos], f"{name} position {pos}")
    assert_close(batch, g.logits[-1], f"{name} batch")


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_engine_sparse_file_with_every_neuron_equals_transformers(tmp_path: Path, name: str) -> None:
    """A threshold below every predictor score selects every neuron: the sparse FFN (ffn_down_t,
    its bias for OPT) must then compute transformers' dense function."""
    g = load_golden(name)
    out = convert(g.folder, g.predictor_dir, outfile=tmp_path / "s.gguf", outtype="f32", threshold=-1e30)
    with powerinfer.Model(out, n_threads=2) as model:
        assert model.info.architecture == g.config["model_type"] and model.info.sparse and model.info.sparse_inference
        assert model.info.predictor_rank == (16, 16)
    steps, batch = engine_logits_per_position(out, g.tokens)
    for pos in range(len(g.tokens)):
        assert_close(steps[pos], g.logits[pos], f"{name} position {pos}")
    assert_close(batch, g.logits[-1], f"{name} batch")


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_engine_f16_sparse_file_generates(tmp_path: Path, name: str) -> None:
    g = load_golden(name)
    out = convert(g.folder, g.predictor_dir, outfile=tmp_path / "s16.gguf")
    with powerinfer.Model(out, n_threads=2) as model:
        assert model.info.weight_type == "F16" and model.info.n_vocab == g.config["vocab_size"]
        with model.create_context(n_ctx=64) as ctx:
            logits = ctx.eval(g.tokens[:6])
            for _ in range(4):  # greedy steps through the KV cache
                assert np.isfinite(logits).all()
                logits = ctx.eval([int(np.argmax(logits))])
            assert ctx.n_past == 10


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_engine_tokenizes_like_transformers(tmp_path: Path, name: str) -> None:
    g = load_golden(name)
    out = convert(g.folder, dense=True, outfile=tmp_path / "d.gguf")
    with powerinfer.Model(out, n_threads=2) as model:
        for text, ids in g.tokenized.items():
            assert model.tokenize(text, add_bos=False) == ids, text


# ---------------------------------------------------------------- the files mean transformers' model


@pytest.mark.parametrize("name", GOLDEN_NAMES)
@pytest.mark.parametrize("dense", [False, True])
def test_converted_file_computes_transformers_logits(tmp_path: Path, name: str, dense: bool) -> None:
    """docs/forward-pass.md's Falcon and OPT blocks, run in NumPy on the converted tensors,
    give transformers' logits at every position: the QKV order, NeoX RoPE, the two norms, the
    position offset, the tied output and the biases mean what the engine will compute."""
    g = load_golden(name)
    out = convert(g.folder, g.predictor_dir, outfile=tmp_path / "f.gguf", outtype="f32", dense=dense)
    got = gguf_forward(out, g.tokens)
    for pos in range(len(g.tokens)):
        assert_close(got[pos], g.logits[pos], f"{name} position {pos}")
