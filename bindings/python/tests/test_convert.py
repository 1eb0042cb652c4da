"""powerinfer-convert on tiny random Hugging Face folders built without torch: every tensor of the
output equals its source after the documented permutation / transposition, the metadata and the
magic are right, and the engine loads and runs what was written (dense logits equal a NumPy
Hugging Face reference)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import powerinfer
from powerinfer.convert import convert
from powerinfer.convert.progress import Progress

from convert_fixtures import TinyModel, make_model, permute_for_rope, read_gguf, reference_logits, tiny_vocab

TOKENS = [1, 270, 280, 300 - 1, 5, 288]


def expected_tensors(t: TinyModel, dense: bool) -> dict[str, np.ndarray]:
    c, w = t.config, t.weights
    out = {"token_embd.weight": w["model.embed_tokens.weight"], "output_norm.weight": w["model.norm.weight"], "output.weight": w["lm_head.weight"]}
    for il in range(c["num_hidden_layers"]):
        p, b = f"model.layers.{il}.", f"blk.{il}."
        out[b + "attn_norm.weight"] = w[p + "input_layernorm.weight"]
        out[b + "attn_q.weight"] = permute_for_rope(w[p + "self_attn.q_proj.weight"], c["num_attention_heads"])
        out[b + "attn_k.weight"] = permute_for_rope(w[p + "self_attn.k_proj.weight"], c["num_key_value_heads"])
        out[b + "attn_v.weight"] = w[p + "self_attn.v_proj.weight"]
        out[b + "attn_output.weight"] = w[p + "self_attn.o_proj.weight"]
        out[b + "ffn_norm.weight"] = w[p + "post_attention_layernorm.weight"]
        out[b + "ffn_gate.weight"] = w[p + "mlp.gate_proj.weight"]
        out[b + "ffn_up.weight"] = w[p + "mlp.up_proj.weight"]
        if dense:
            out[b + "ffn_down.weight"] = w[p + "mlp.down_proj.weight"]
        else:
            out[b + "ffn_down_t.weight"] = w[p + "mlp.down_proj.weight"].T
            out[b + "fc1.weight"], out[b + "fc2.weight"] = t.predictor[il]
    return out


def assert_tensors_equal(path: Path, t: TinyModel, dense: bool, f16: bool) -> None:
    g = read_gguf(path)
    want = expected_tensors(t, dense)
    assert list(g.tensors)[:3] == ["token_embd.weight", "output_norm.weight", "output.weight"]
    assert set(g.tensors) == set(want)
    for name, value in want.items():
        kind, ne, off = g.tensors[name]
        assert off % 32 == 0, name
        assert ne == tuple(reversed(value.shape)), name  # ne[0] is numpy's last axis
        two_d = value.ndim == 2
        assert kind == (1 if f16 and two_d else 0), name
        expected = value.astype(np.float16) if f16 and two_d else value.astype(np.float32)
        np.testing.assert_array_equal(g.array(name), expected, err_msg=name)


def test_sparse_f32_every_tensor_and_metadata(tmp_path: Path) -> None:
    t = make_model(tmp_path / "relu")
    out = convert(t.folder, t.predictor_dir, outtype="f32")
    assert out == t.folder / "relu.f32.powerinfer.gguf"
    g = read_gguf(out)
    assert g.magic == b"PWRI" and g.version == 3
    assert_tensors_equal(out, t, dense=False, f16=False)
    m = g.metadata
    c = t.config
    assert m["general.architecture"] == "llama"
    assert m["general.file_type"] == 0
    assert m["llama.context_length"] == 256
    assert m["llama.embedding_length"] == 64
    assert m["llama.block_count"] == 2
    assert m["llama.feed_forward_length"] == 128
    assert m["llama.attention.head_count"] == 4
    assert m["llama.attention.head_count_kv"] == 2
    assert m["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(c["rms_norm_eps"])
    assert m["llama.rope.dimension_count"] == 16
    assert m["llama.rope.freq_base"] == pytest.approx(10000.0)
    assert m["powerinfer.sparse_threshold"] == pytest.approx(0.25)
    assert "powerinfer.ffn_activation" not in m
    pieces, scores, types = tiny_vocab()
    assert m["tokenizer.ggml.model"] == "llama"
    assert m["tokenizer.ggml.tokens"] == pieces
    assert m["tokenizer.ggml.scores"] == pytest.approx(scores)
    assert m["tokenizer.ggml.token_type"] == types
    assert (m["tokenizer.ggml.bos_token_id"], m["tokenizer.ggml.eos_token_id"], m["tokenizer.ggml.unknown_token_id"]) == (1, 2, 0)
    assert m["tokenizer.ggml.add_bos_token"] is True and m["tokenizer.ggml.add_eos_token"] is False
    assert m["tokenizer.chat_template"].startswith("{% for m in messages %}")


def test_sparse_f16_loads_and_generates(tmp_path: Path) -> None:
    t = make_model(tmp_path / "relu")
    out = convert(t.folder, t.predictor_dir, threshold=-0.5)
    assert_tensors_equal(out, t, dense=False, f16=True)
    with powerinfer.Model(out, n_threads=2) as model:
        info = model.info
        assert info.sparse and info.sparse_inference and info.ffn_activation == "relu"
        assert info.predictor_rank == (32, 32) and info.weight_type == "F16"
        assert info.sparse_threshold == pytest.approx(-0.5)  # --threshold wins over config.json
        assert model.tokenize("the world", add_bos=True) == [1, 271, 292]  # ▁the ▁world
        with model.create_context(n_ctx=64) as ctx:
            text = ctx.generate("hello", max_tokens=8, temperature=0)
            assert ctx.n_past > 2
            assert isinstance(text, str)


@pytest.mark.parametrize("act", ["relu", "silu"])
def test_dense_logits_equal_reference(tmp_path: Path, act: str) -> None:
    t = make_model(tmp_path / act, hidden_act=act, predictor=None)
    out = convert(t.folder, dense=True, outtype="f32")
    assert out == t.folder / f"{act}.f32.gguf"
    g = read_gguf(out)
    assert g.magic == b"GGUF"
    assert_tensors_equal(out, t, dense=True, f16=False)
    assert g.metadata.get("powerinfer.ffn_activation") == ("relu" if act == "relu" else None)
    with powerinfer.Model(out, n_threads=2) as model:
        assert not model.info.sparse and model.info.ffn_activation == act
        with model.create_context(n_ctx=64) as ctx:
            got = ctx.eval(TOKENS).copy()
    want = reference_logits(t.weights, t.config, TOKENS)
    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max()


@pytest.mark.parametrize(
    "fmt,shards,dtype",
    [("safetensors", 3, np.float32), ("safetensors", 1, np.float16), ("bf16", 2, np.float32), ("bin", 1, np.float32), ("bin", 2, np.float16)],
)
def test_checkpoint_layouts(tmp_path: Path, fmt: str, shards: int, dtype: type) -> None:
    t = make_model(tmp_path / "m", fmt=fmt, shards=shards, dtype=dtype)
    out = convert(t.folder, t.predictor_dir, outtype="f32")
    assert_tensors_equal(out, t, dense=False, f16=False)


@pytest.mark.parametrize("layout", ["safetensors", "embedded"])
def test_predictor_layouts(tmp_path: Path, layout: str) -> None:
    t = make_model(tmp_path / "m", predictor=layout, rank=48)
    out = convert(t.folder, t.predictor_dir, outtype="f32")
    assert_tensors_equal(out, t, dense=False, f16=False)
    expected = 0.25 if layout == "safetensors" else 0.0
    assert read_gguf(out).metadata["powerinfer.sparse_threshold"] == pytest.approx(expected)


@pytest.mark.parametrize("outtype,weight_type", [("q8_0", "Q8_0"), ("q4_0", "Q4_0")])
def test_quantized_outputs_load(tmp_path: Path, outtype: str, weight_type: str) -> None:
    t = make_model(tmp_path / "m")
    out = convert(t.folder, t.predictor_dir, outtype=outtype)
    g = read_gguf(out)
    assert g.magic == b"PWRI"
    assert g.tensors["blk.0.ffn_up.weight"][0] == {"q8_0": 8, "q4_0": 2}[outtype]
    assert g.tensors["blk.0.attn_norm.weight"][0] == 0
    assert g.metadata["powerinfer.sparse_threshold"] == pytest.approx(0.25)
    assert sorted(p.name for p in t.folder.iterdir() if ".tmp-" in p.name) == []
    with powerinfer.Model(out, n_threads=2) as model:
        assert model.info.weight_type == weight_type and model.info.sparse
        with model.create_context(n_ctx=64) as ctx:
            ctx.generate("hello", max_tokens=4, temperature=0)
    dense = convert(t.folder, dense=True, outtype=outtype)
    assert read_gguf(dense).magic == b"GGUF"
    with powerinfer.Model(dense, n_threads=2) as model:
        assert not model.info.sparse and model.info.ffn_activation == "relu"


def test_keep_predictor_leaves_fc_unquantized(tmp_path: Path) -> None:
    # F32 weights are written as F32 before quantizing, F16 ones as F16; the kept predictor
    # stays at that type.
    for dtype, kept in ((np.float32, 0), (np.float16, 1)):
        t = make_model(tmp_path / f"m{kept}", dtype=dtype)
        g = read_gguf(convert(t.folder, t.predictor_dir, outtype="q4_0", keep_predictor=True))
        assert g.tensors["blk.1.fc1.weight"][0] == kept and g.tensors["blk.1.ffn_gate.weight"][0] == 2


def test_tokenizer_json_fallback_and_vocab_padding(tmp_path: Path) -> None:
    t = make_model(tmp_path / "m", tokenizer="json", extra_config={"vocab_size": 320})
    out = convert(t.folder, t.predictor_dir, outtype="f32")
    m = read_gguf(out).metadata
    pieces, _, types = tiny_vocab()
    assert m["tokenizer.ggml.tokens"][:300] == pieces
    assert m["tokenizer.ggml.tokens"][300:] == [f"<dummy{i:05}>" for i in range(300, 320)]
    assert m["tokenizer.ggml.token_type"][:300] == types  # specials control, <0xXX> byte
    assert set(m["tokenizer.ggml.token_type"][300:]) == {5}
    scores = m["tokenizer.ggml.scores"]
    ids = {p: i for i, p in enumerate(pieces)}
    # merges "▁ t", "h e", "▁t he", "▁ a": ranks 0..3, scored -rank; unmerged pieces lower.
    assert [scores[ids[p]] for p in ("▁t", "he", "▁the", "▁a")] == [0.0, -1.0, -2.0, -3.0]
    assert max(s for i, s in enumerate(scores[:300]) if pieces[i] not in ("▁t", "he", "▁the", "▁a")) < -3.0
    with powerinfer.Model(out, n_threads=2) as model:
        assert model.info.n_vocab == 320


def test_prosparse_and_bamboo(tmp_path: Path) -> None:
    pro = make_model(tmp_path / "pro", hidden_act="fatrelu", extra_config={"architectures": ["SparseLlamaForCausalLM"], "model_type": "sparsellama", "hidden_act_param": 0.01})
    g = read_gguf(convert(pro.folder, pro.predictor_dir, outtype="f32"))
    assert g.metadata["general.architecture"] == "llama"
    assert g.metadata["powerinfer.fatrelu_threshold"] == pytest.approx(0.01)
    bam = make_model(tmp_path / "bam", extra_config={"architectures": ["BambooForCausalLM"], "model_type": "bamboo"})
    out = convert(bam.folder, bam.predictor_dir)
    assert read_gguf(out).metadata["general.architecture"] == "bamboo"
    assert "bamboo.block_count" in read_gguf(out).metadata
    with powerinfer.Model(out, n_threads=2) as model:
        assert model.info.architecture == "bamboo" and model.info.sparse


def test_tied_embeddings_and_linear_rope(tmp_path: Path) -> None:
    t = make_model(tmp_path / "m", extra_config={"tie_word_embeddings": True, "rope_scaling": {"type": "linear", "factor": 2.0}})
    del t.weights["lm_head.weight"]
    from convert_fixtures import write_safetensors

    write_safetensors(t.folder / "model.safetensors", t.weights)
    g = read_gguf(convert(t.folder, t.predictor_dir, outtype="f32"))
    np.testing.assert_array_equal(g.array("output.weight"), t.weights["model.embed_tokens.weight"])
    assert g.metadata["llama.rope.scaling.type"] == "linear"
    assert g.metadata["llama.rope.scaling.factor"] == pytest.approx(2.0)


def _console_script() -> Path:
    return Path(sys.executable).parent / "powerinfer-convert"


@pytest.mark.parametrize("how", ["module", "script"])
def test_command_line(tmp_path: Path, how: str) -> None:
    t = make_model(tmp_path / "Relu-Tiny")
    cmd = [sys.executable, "-m", "powerinfer.convert"] if how == "module" else [str(_console_script())]
    if how == "script" and not _console_script().exists():
        pytest.skip("console script not next to the interpreter")
    r = subprocess.run([*cmd, "--quiet", str(t.folder), str(t.predictor_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(t.folder / "Relu-Tiny.f16.powerinfer.gguf")
    assert r.stderr == ""
    out = tmp_path / "dense.gguf"
    r = subprocess.run([*cmd, "--dense", "--outtype", "f32", "--outfile", str(out), str(t.folder)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert read_gguf(out).magic == b"GGUF"
    assert "-> dense F32" in r.stderr


def test_output_mode_follows_umask(tmp_path: Path) -> None:
    t = make_model(tmp_path / "m")
    old = os.umask(0o022)
    try:
        out = convert(t.folder, t.predictor_dir)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_progress_bar() -> None:
    import io

    stream = io.StringIO()
    bar = Progress(1000, "write f16", True, stream)
    bar.advance(1000)
    bar.close()
    assert "write f16 [##############################] 100.0%" in stream.getvalue()
    quiet = io.StringIO()
    Progress(10, "x", False, quiet).advance(10)
    assert quiet.getvalue() == ""


def test_no_torch_imported(tmp_path: Path) -> None:
    # With sys.modules["torch"] = None every `import torch` raises, so this fails wherever torch
    # is installed or not if the package or the converter reaches for it.
    t = make_model(tmp_path / "m")
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import powerinfer, powerinfer.convert, powerinfer.train_predictor, powerinfer.train_predictor.cli\n"
        f"out = powerinfer.convert.convert({str(t.folder)!r}, {str(t.predictor_dir)!r})\n"
        "print(out.stat().st_size > 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"
