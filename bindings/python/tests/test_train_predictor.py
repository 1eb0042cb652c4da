"""powerinfer-train-predictor (docs/predictor-training.md) on the really-trained fixture.

Without torch (CI's venv) the trainer's torch-free half is tested: the corpus collection through
the library's FFN observer, its activation statistics against trace_ffn and the NumPy reading of
the planner's file, the command line's errors. With torch (the `train` extra) a short training
run goes end to end: trained predictor folder -> powerinfer-convert -> a sparse model that runs.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import powerinfer
from powerinfer.train_predictor import corpus
from powerinfer.train_predictor.cli import main as train_main
from powerinfer.train_predictor.collect import collect
from powerinfer.train_predictor.corpus import CorpusError, is_held_out, read_tokens, windows
from powerinfer.train_predictor.output_folder import commit, staged
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


class _WordModel:
    """A tokenizer that numbers whitespace-separated words and records the pieces it gets."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.vocab: dict[str, int] = {}

    def tokenize(self, text: str, add_bos: bool) -> list[int]:
        self.pieces.append(text)
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]


def test_a_long_line_is_read_in_bounded_pieces_without_splitting_words(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "_PIECE_CHARS", 64)
    words = [f"w{i % 97}" + "x" * (i % 7) for i in range(3000)]
    path = tmp_path / "one-line.txt"
    path.write_text(" ".join(words))
    model = _WordModel()
    tokens = read_tokens(model, path, 10**6)
    assert len(model.pieces) > 100 and max(map(len, model.pieces)) <= 2 * 64
    whole = _WordModel()
    whole.vocab = model.vocab
    np.testing.assert_array_equal(tokens, whole.tokenize(path.read_text(), add_bos=False))


def test_text_without_any_space_is_still_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "_PIECE_CHARS", 64)
    path = tmp_path / "no-space.txt"
    path.write_text("x" * 1000)
    model = _WordModel()
    read_tokens(model, path, 10**6)
    assert "".join(model.pieces) == "x" * 1000 and max(map(len, model.pieces)) <= 2 * 64


def test_a_tokenizer_error_is_a_corpus_error_naming_the_file(tmp_path):
    class Refusing:
        def tokenize(self, text: str, add_bos: bool) -> list[int]:
            raise powerinfer.InvalidArgumentError("text too long")

    path = tmp_path / "corpus.txt"
    path.write_text("In the beginning\n")
    with pytest.raises(CorpusError, match="corpus.txt: text too long"):
        read_tokens(Refusing(), path, 100)


def _old_run(out: Path) -> dict[str, bytes]:
    out.mkdir()
    files = {"model_0.pt": b"old 0", "model_7.pt": b"old 7", "config.json": b"{}",
             "notes.txt": b"mine"}
    for name, data in files.items():
        (out / name).write_bytes(data)
    return files


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_committed_run_replaces_the_old_one_and_drops_its_stale_layers(tmp_path):
    out = tmp_path / "predictor"
    _old_run(out)
    with staged(out) as stage:
        (stage / "model_0.pt").write_bytes(b"new 0")
        (stage / "config.json").write_bytes(b"{\"n_layer\": 1}")
        commit(stage, out)
    assert _contents(out) == {"model_0.pt": b"new 0", "config.json": b"{\"n_layer\": 1}",
                              "notes.txt": b"mine"}
    assert [p.name for p in tmp_path.iterdir()] == ["predictor"]


def test_a_new_output_folder_appears_whole(tmp_path):
    out = tmp_path / "deeper" / "predictor"
    with staged(out) as stage:
        (stage / "model_0.pt").write_bytes(b"new 0")
        assert not out.exists()
        commit(stage, out)
    assert _contents(out) == {"model_0.pt": b"new 0"}
    assert [p.name for p in out.parent.iterdir()] == ["predictor"]


def test_a_failed_run_changes_nothing_in_the_output_folder(tmp_path):
    out = tmp_path / "predictor"
    before = _old_run(out)
    with pytest.raises(OSError):
        with staged(out) as stage:
            (stage / "model_0.pt").write_bytes(b"new 0")
            raise OSError(28, "No space left on device")
    assert _contents(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["predictor"]


@pytest.mark.parametrize("option,value", [
    ("--max-ratio", "0"), ("--max-ratio", "-1"), ("--max-ratio", "nan"), ("--max-ratio", "inf"),
    ("--pos-weight", "0"), ("--pos-weight", "nan"), ("--pos-weight", "-2"),
    ("--threshold", "nan"), ("--threshold", "inf"), ("--threshold", "x"),
])
def test_bad_numbers_are_usage_errors(option, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        train_main(["-m", "x.gguf", "-f", "x.txt", "-o", str(tmp_path / "out"), option, value])
    assert stopped.value.code == 2
    assert option in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


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
    _old_run(out)
    result = _train("-m", str(dense_model), "-f", str(VALIDATION), "-o", str(out), "--rank", "16",
                    "--n-ctx", "64", "--max-tokens", "2048", "--epochs", "2", "--threads", "2",
                    "--quiet")
    assert result.returncode == 0, result.stderr
    with powerinfer.Model(dense_model, dense=True, n_threads=2) as m:
        info = m.info
    for layer in range(info.n_layer):
        assert (out / f"model_{layer}.pt").is_file()
    # The older run's layer 7 is gone (the fixture has fewer), files not ours are kept.
    assert info.n_layer <= 7 and not (out / "model_7.pt").exists()
    assert (out / "notes.txt").read_bytes() == b"mine"
    assert [p.name for p in tmp_path.iterdir()] == ["predictor"]
    report = json.loads((out / "report.json").read_text())
    assert report["layers"][0]["selection"]["recall"] > 0
    assert json.loads((out / "config.json").read_text())["n_layer"] == info.n_layer
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


@pytest.mark.skipif(not HAS_TORCH, reason="needs the train extra (torch)")
def test_a_run_failing_in_training_leaves_the_old_output(dense_model, tmp_path, monkeypatch):
    from powerinfer.train_predictor import writers

    written = writers.write_predictor

    def full_disk_at_layer_1(out: Path, layer: int, state: dict) -> None:
        if layer == 1:
            raise OSError(28, "No space left on device", str(out / "model_1.pt"))
        written(out, layer, state)

    monkeypatch.setattr(writers, "write_predictor", full_disk_at_layer_1)
    out = tmp_path / "predictor"
    before = _old_run(out)
    code = train_main(["-m", str(dense_model), "-f", str(VALIDATION), "-o", str(out), "--rank",
                       "8", "--n-ctx", "64", "--max-tokens", "1024", "--epochs", "1",
                       "--threads", "2", "--quiet"])
    assert code == 1
    assert _contents(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["predictor"]


@pytest.mark.skipif(not HAS_TORCH, reason="needs the train extra (torch)")
def test_auto_ranks_never_exceed_n_ff():
    from powerinfer.train_predictor.ranks import candidates

    assert candidates(4096, 11008) == [256, 512, 1024, 2048, 4096]
    assert candidates(64, 4) == [4]
    assert max(candidates(256, 16)) == 16
