"""powerinfer-train-predictor (docs/predictor-training.md) on the really-trained fixture.

Without torch (CI's venv) the trainer's torch-free half is tested: the corpus collection through
the library's FFN observer, its activation statistics against trace_ffn and the NumPy reading of
the planner's file, the command line's errors. With torch (the `train` extra) a short training
run goes end to end: trained predictor folder -> powerinfer-convert -> a sparse model that runs.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import powerinfer
from powerinfer.train_predictor.collect import collect
from powerinfer.train_predictor.corpus import is_held_out, read_tokens, windows
from powerinfer.train_predictor.writers import write_activation_stats

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURE = REPO_ROOT / "tests" / "data" / "relu-llama-kjv"
VALIDATION = REPO_ROOT / "tests" / "data" / "relu-llama-kjv.validation.txt"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "powerinfer.train_predictor", *args], capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def dense_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("train") / "kjv-dense.gguf"
    result = subprocess.run(
        [sys.executable, "-m", "powerinfer.convert", "--quiet", "--dense", "--outfile", str(out),
         str(FIXTURE)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return out


def _read_activation_stats(path: Path) -> tuple[int, np.ndarray]:
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(path)
    field = reader.fields["powerinfer.activation_stats.tokens"]
    tokens = int(field.parts[field.data[0]][0])
    counts = {t.name: np.asarray(t.data) for t in reader.tensors}
    return tokens, np.stack([counts[f"blk.{l}.activation_count"] for l in range(len(counts))])


def test_collection_counts_what_trace_ffn_sees_and_the_planner_reads_it(dense_model, tmp_path):
    n_ctx = 64
    with powerinfer.Model(dense_model, dense=True, n_threads=2) as model:
        info = model.info
        tokens = read_tokens(model, VALIDATION, 6 * n_ctx)
        win = windows(tokens, n_ctx, info.bos)
        held = is_held_out(len(win), 0.34)
        assert 0 < held.sum() < len(win)
        with model.create_context(n_ctx=n_ctx, n_batch=n_ctx) as ctx:
            work = tmp_path / "work"
            work.mkdir()
            data = collect(ctx, win, held, info.n_layer, info.n_embd, info.n_ff, work,
                           lambda done, total: None)
            expected = sum(ctx.trace_ffn(w.tolist()).active.sum(axis=1) for w in win)
            first_held = int(np.flatnonzero(held)[0])
            held_trace = ctx.trace_ffn(win[first_held].tolist())
    assert data.n_tokens == win.size and data.n_train == int((~held).sum()) * n_ctx
    np.testing.assert_array_equal(data.activation_counts, expected)
    layer = data.layer(2)
    # Held-out windows come after the training ones, masks packed 8 neurons a byte.
    held_rows = slice(data.n_train, data.n_train + n_ctx)
    unpacked = np.unpackbits(layer.masks[held_rows], axis=-1, bitorder="little")[:, : info.n_ff]
    np.testing.assert_array_equal(unpacked.astype(bool), held_trace.active[2])
    np.testing.assert_array_equal(layer.inputs[held_rows], held_trace.inputs[2].astype(np.float16))

    stats = tmp_path / "activation_stats.gguf"
    write_activation_stats(stats, data.activation_counts, data.n_tokens)
    tokens_read, counts_read = _read_activation_stats(stats)
    assert tokens_read == data.n_tokens
    np.testing.assert_array_equal(counts_read, data.activation_counts.astype(np.float32))


def test_committed_activation_statistics_steer_the_planner(tmp_path):
    stats = FIXTURE.parent / "relu-llama-kjv-predictor" / "activation_stats.gguf"
    _, counts = _read_activation_stats(stats)
    # A copy, since the planner caches its placement beside the model.
    model_path = tmp_path / "kjv.q4_0.powerinfer.gguf"
    shutil.copyfile(FIXTURE.parent / "relu-llama-kjv.q4_0.powerinfer.gguf", model_path)
    with powerinfer.Model(
        model_path, offload_device="cpu", vram_budget=16 * 2**20, activation_stats=stats,
        n_threads=2
    ) as model:
        hot = model.info.hot_neurons[: model.info.n_layer]
        assert 0 < sum(hot) < model.info.n_layer * model.info.n_ff
        with model.create_context(n_ctx=128) as ctx:
            assert ctx.generate("In the beginning God created", max_tokens=8, temperature=0)
    # The planner puts more of a layer's neurons on the device where they fire more often.
    per_layer = counts.sum(axis=1)
    assert hot[int(np.argmax(per_layer))] > hot[int(np.argmin(per_layer))]


def test_bad_arguments_are_one_line_usage_errors(tmp_path):
    result = _train("-m", "x.gguf", "-f", "x.txt", "-o", str(tmp_path), "--rank", "0")
    assert result.returncode == 2
    assert "--rank" in result.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed")
def test_without_torch_the_trainer_says_which_extra_to_install(dense_model, tmp_path):
    result = _train("-m", str(dense_model), "-f", str(VALIDATION), "-o", str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "torch is missing" in result.stderr and "powerinfer[train]" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not HAS_TORCH, reason="needs the train extra (torch)")
def test_missing_corpus_is_one_line_error(dense_model, tmp_path):
    result = _train("-m", str(dense_model), "-f", str(tmp_path / "none.txt"), "-o",
                    str(tmp_path / "out"))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "none.txt" in result.stderr


@pytest.mark.skipif(not HAS_TORCH, reason="needs the train extra (torch)")
def test_a_short_training_run_gives_a_predictor_the_converter_and_engine_use(dense_model, tmp_path):
    out = tmp_path / "predictor"
    result = _train("-m", str(dense_model), "-f", str(VALIDATION), "-o", str(out), "--rank", "16",
                    "--n-ctx", "64", "--max-tokens", "2048", "--epochs", "2", "--threads", "2",
                    "--quiet")
    assert result.returncode == 0, result.stderr
    info = powerinfer.Model(dense_model).info
    for layer in range(info.n_layer):
        assert (out / f"model_{layer}.pt").is_file()
    assert (out / "config.json").is_file() and (out / "report.json").is_file()
    sparse = tmp_path / "sparse.gguf"
    converted = subprocess.run(
        [sys.executable, "-m", "powerinfer.convert", "--quiet", "--outfile", str(sparse),
         str(FIXTURE), str(out)],
        capture_output=True,
        text=True,
    )
    assert converted.returncode == 0, converted.stderr
    with powerinfer.Model(sparse, n_threads=2) as model:
        assert model.info.sparse_inference
        assert model.info.predictor_rank[: info.n_layer] == (16,) * info.n_layer
        with model.create_context(n_ctx=128) as ctx:
            assert ctx.generate("And God said", max_tokens=8, temperature=0)
            assert 0.0 < ctx.stats().ffn_active_fraction < 1.0
