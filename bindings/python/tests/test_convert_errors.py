"""Every bad input of powerinfer-convert: exit status 1 (2 for usage), exactly one line on stderr
`powerinfer-convert: <file>: <tensor>: <reason>`, and no output or temporary file left."""

from __future__ import annotations

import json
import os
import struct
import warnings
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from powerinfer.convert import main, torch_checkpoint
from powerinfer.convert.errors import ConvertError
from powerinfer.convert.torch_checkpoint import read_torch_checkpoint
from powerinfer.convert.tensor_plan import PlannedTensor

from convert_fixtures import TinyModel, PickleOps, make_model, tiny_vocab, write_safetensors, write_sentencepiece_model, write_torch_zip


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def run_fails(capsys: pytest.CaptureFixture[str], root: Path, args: list[str], *needles: str, code: int = 1) -> str:
    before = files_under(root)
    assert main(["--quiet", *args]) == code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("powerinfer-convert: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert captured.out == ""
    assert files_under(root) == before  # no output, no temporary file
    return lines[0]


@pytest.fixture
def tiny(tmp_path: Path) -> TinyModel:
    return make_model(tmp_path / "m")


def test_truncated_safetensors_header(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    st = tiny.folder / "model.safetensors"
    data = st.read_bytes()
    st.write_bytes(data[:5])
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{st}: truncated")
    st.write_bytes(data[:200])  # the length is there, the JSON is not
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{st}: truncated header")


def test_truncated_safetensors_data(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    st = tiny.folder / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{st}: ", "outside the", "truncated file?")


def test_bad_safetensors_json(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    st = tiny.folder / "model.safetensors"
    st.write_bytes((4).to_bytes(8, "little") + b"{no}")
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{st}: header is not valid JSON")


def test_missing_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", shards=2)
    (t.folder / "model-00002-of-00002.safetensors").unlink()
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], str(t.folder / "model.safetensors.index.json"), "shard model-00002-of-00002.safetensors is missing", "model.")


def test_shards_without_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", shards=2)
    (t.folder / "model.safetensors.index.json").unlink()
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "model.safetensors.index.json: missing")


def test_missing_config(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny.folder / "config.json").unlink()
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{tiny.folder / 'config.json'}: missing")


def test_unknown_architecture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", extra_config={"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "config.json: architectures: unknown architecture (architectures: GPT2LMHeadModel; model_type: gpt2)")


def test_silu_refused_for_sparse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", hidden_act="silu")
    line = run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "config.json: hidden_act: refusing sparse output", "--dense")
    assert "no sparsity" in line and "predictor assumes ReLU" in line


def test_sparse_needs_predictor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", predictor=None)
    run_fails(capsys, tmp_path, [str(t.folder)], "sparse output needs a predictor", "--dense")


def test_predictor_wrong_layer_count(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    assert tiny.predictor_dir is not None
    (tiny.predictor_dir / "model_1.pt").unlink()
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{tiny.predictor_dir}: model_1.pt: predictor has 1 layers but the model has 2")
    fc1, fc2 = tiny.predictor[0]
    write_torch_zip(tiny.predictor_dir / "model_1.pt", {"fc1.weight": fc1, "fc2.weight": fc2})
    write_torch_zip(tiny.predictor_dir / "model_2.pt", {"fc1.weight": fc1, "fc2.weight": fc2})
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "model_2.pt: predictor has a layer 2 but the model has only 2 layers")


def test_predictor_wrong_shape(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    assert tiny.predictor_dir is not None
    fc1, fc2 = tiny.predictor[1]
    path = tiny.predictor_dir / "model_1.pt"
    write_torch_zip(path, {"fc1.weight": fc1, "fc2.weight": fc2[:100]})
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: fc2.weight: shape [100, 32], expected [128, 32]")
    write_torch_zip(path, {"fc1.weight": fc1[:, :60], "fc2.weight": fc2})
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: fc1.weight: shape [32, 60], expected [rank, 64]")


def test_predictor_safetensors_wrong_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", predictor="safetensors")
    assert t.predictor_dir is not None
    fc1, fc2 = t.predictor[0]
    tensors = {f"model.layers.{il}.mlp.predictor.fc{i + 1}.weight": w for il, pair in t.predictor.items() for i, w in enumerate(pair)}
    tensors["model.layers.0.mlp.predictor.fc2.weight"] = fc2[:, :16]
    write_safetensors(t.predictor_dir / "predictor.safetensors", tensors)
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "predictor.safetensors: model.layers.0.mlp.predictor.fc2.weight: shape [128, 16], expected [128, 32]")


@pytest.mark.parametrize("where", ["predictor", "checkpoint"])
def test_disallowed_pickle_global(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    marker = tmp_path / "pwned"
    t = make_model(tmp_path / "m", fmt="bin" if where == "checkpoint" else "safetensors")
    assert t.predictor_dir is not None
    path = t.predictor_dir / "model_0.pt" if where == "predictor" else t.folder / "pytorch_model.bin"
    tensors = {"fc1.weight": t.predictor[0][0], "fc2.weight": t.predictor[0][1]} if where == "predictor" else t.weights
    write_torch_zip(path, tensors, evil_global=("os", "system"))
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], f"{path}: data.pkl: pickle global os.system is not allowed", "nothing was executed")
    assert not marker.exists()


def test_legacy_torch_file(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    assert tiny.predictor_dir is not None
    path = tiny.predictor_dir / "model_0.pt"
    path.write_bytes(b"\x80\x02not a zip")
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: not a zip-format torch.save file")


def test_missing_and_misshapen_tensor(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    w = dict(tiny.weights)
    del w["model.layers.1.mlp.up_proj.weight"]
    write_safetensors(tiny.folder / "model.safetensors", w)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "model.layers.1.mlp.up_proj.weight: missing from the checkpoint")
    w["model.layers.1.mlp.up_proj.weight"] = np.zeros((128, 32), np.float32)
    write_safetensors(tiny.folder / "model.safetensors", w)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "model.safetensors: model.layers.1.mlp.up_proj.weight: shape [128, 32], expected [128, 64]")


def test_unexpected_tensor(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    w = dict(tiny.weights)
    w["model.layers.0.self_attn.q_proj.bias"] = np.zeros(64, np.float32)
    write_safetensors(tiny.folder / "model.safetensors", w)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "model.safetensors: model.layers.0.self_attn.q_proj.bias: unexpected tensor")


def test_integer_weight(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    w = dict(tiny.weights)
    w["model.norm.weight"] = np.ones(64, np.int64)
    write_safetensors(tiny.folder / "model.safetensors", w)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "model.safetensors: model.norm.weight: dtype I64 is not a float type")


def test_no_tokenizer(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny.folder / "tokenizer.model").unlink()
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "has neither tokenizer.model nor tokenizer.json")


def test_corrupt_tokenizer_model(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny.folder / "tokenizer.model").write_bytes(b"\x0a\xff\xff\xff")
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "tokenizer.model: is not a SentencePiece model")


def test_byte_level_bpe_refused(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny.folder / "tokenizer.model").unlink()
    (tiny.folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}))
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "tokenizer.json: model.type: is a byte-level (GPT-2 style) BPE")


def test_unsupported_rope_scaling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = make_model(tmp_path / "m", extra_config={"rope_scaling": {"type": "yarn", "factor": 4.0}})
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "rope_scaling: rope_scaling type 'yarn'")


def test_output_folder_missing(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    run_fails(capsys, tmp_path, ["--outfile", str(tmp_path / "nowhere" / "x.gguf"), str(tiny.folder), str(tiny.predictor_dir)], "output folder does not exist")


def test_outfile_is_input(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    run_fails(capsys, tmp_path, ["--outfile", str(tiny.folder / "model.safetensors"), str(tiny.folder), str(tiny.predictor_dir)], "is one of the input files")


def test_failure_while_writing_leaves_nothing(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    original: Callable[..., None] = PlannedTensor.write

    def failing(self: PlannedTensor, f, advance) -> None:  # type: ignore[no-untyped-def]
        if self.name == "blk.1.ffn_up.weight":
            raise OSError(28, os.strerror(28), str(tiny.folder / "out"))
        original(self, f, advance)

    monkeypatch.setattr(PlannedTensor, "write", failing)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "No space left on device")


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["--outtype", "q2_k", str(tmp_path)])
    assert e.value.code == 2
    capsys.readouterr()
    run_fails(capsys, tmp_path, [str(tmp_path / "absent")], "is not a folder")


# ---------------------------------------------------------------- crafted torch.save files


def predictor_file(t: TinyModel) -> tuple[Path, dict[str, np.ndarray]]:
    assert t.predictor_dir is not None
    return t.predictor_dir / "model_0.pt", {"fc1.weight": t.predictor[0][0], "fc2.weight": t.predictor[0][1]}


def build_on_storage_class() -> bytes:
    """GLOBAL torch.HalfStorage, then BUILD with {'dtype': 'BF16'} and the slot form
    (None, {'dtype': 'BF16'}), then POP: what would retype every later HalfStorage."""
    p = PickleOps(header=False)
    for slot_form in (False, True):
        p.glob("torch", "HalfStorage")
        if slot_form:
            p.op(b"N")
        p.op(b"}")
        p.string("dtype")
        p.string("BF16")
        p.op(b"s")
        if slot_form:
            p.op(b"\x86")
        p.op(b"b0")
    return bytes(p.out)


def test_pickle_build_cannot_retype_storages(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    path, tensors = predictor_file(tiny)
    write_torch_zip(path, tensors, prologue=build_on_storage_class())
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: data.pkl: cannot read the pickle", "(BUILD); refused")
    half = {"w": np.arange(12, dtype=np.float16).reshape(3, 4)}
    write_torch_zip(tmp_path / "half.pt", half)
    ref = read_torch_checkpoint(tmp_path / "half.pt")["w"]
    assert ref.dtype == "F16"
    np.testing.assert_array_equal(ref.load(), half["w"])


def test_pickle_build_on_a_storage_or_tensor(tmp_path: Path) -> None:
    a = np.ones((2, 2), np.float32)
    for target in ("storage", "tensor"):
        p = PickleOps(header=False)
        p.glob("torch._utils", "_rebuild_tensor_v2")
        p.op(b"(")
        p.op(b"(")
        p.string("storage")
        p.glob("torch", "FloatStorage")
        p.string("0")
        p.string("cpu")
        p.int(4)
        p.op(b"tQ")
        if target == "storage":
            p.op(b"}")
            p.string("numel")
            p.int(1 << 30)
            p.op(b"sb")
        p.int(0)
        p.tuple([2, 2])
        p.tuple([2, 1])
        p.op(b"tR")
        if target == "tensor":
            p.op(b"}")
            p.string("shape")
            p.tuple([1 << 20, 1 << 20])
            p.op(b"sb")
        p.op(b"0")
        write_torch_zip(tmp_path / f"{target}.pt", {"w": a}, prologue=bytes(p.out))
        with pytest.raises(ConvertError, match=r"data\.pkl: cannot read the pickle: .*\(BUILD\); refused"):
            read_torch_checkpoint(tmp_path / f"{target}.pt")


@pytest.mark.parametrize("member", ["data.pkl", "byteorder"])
def test_compressed_pickle_or_byteorder_refused(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str], member: str) -> None:
    path, tensors = predictor_file(tiny)
    write_torch_zip(path, tensors, deflate=frozenset({member}))
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: model_0/{member}: is compressed")


def test_oversized_pickle_refused(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert torch_checkpoint.MAX_PICKLE_BYTES == 512 << 20
    monkeypatch.setattr(torch_checkpoint, "MAX_PICKLE_BYTES", 64)
    path, _ = predictor_file(tiny)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: model_0/data.pkl: has ", "more than the 64 allowed")


@pytest.mark.parametrize("bad", ["32", 32.0, True])
def test_non_integer_size(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str], bad: object) -> None:
    path, tensors = predictor_file(tiny)
    write_torch_zip(path, tensors, sizes={"fc1.weight": [bad, 64]})
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: fc1.weight: storage offset, size and stride must be integers")


def test_storage_past_end_of_file(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    # The central directory is intact but the last storage's local header claims a long extra
    # field, so its data would lie beyond the end of the file, as in a cut-short copy.
    path, _ = predictor_file(tiny)
    with zipfile.ZipFile(path) as zf:
        header = zf.getinfo("model_0/data/1").header_offset
    data = bytearray(path.read_bytes())
    data[header + 28 : header + 30] = struct.pack("<H", 0xFFFF)
    path.write_bytes(bytes(data))
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: fc2.weight: storage 1 runs past the end of the file (truncated file?)")


def test_corrupt_zip_member(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = predictor_file(tiny)
    data = path.read_bytes()
    at = data.index(b"OrderedDict")
    path.write_bytes(data[:at] + b"o" + data[at + 1 :])  # the CRC no longer matches
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], f"{path}: model_0/data.pkl: corrupt zip archive (bad CRC-32")


# ---------------------------------------------------------------- values and vocabularies


def test_f16_overflow(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    w = dict(tiny.weights)
    w["model.layers.1.mlp.up_proj.weight"] = w["model.layers.1.mlp.up_proj.weight"].copy()
    w["model.layers.1.mlp.up_proj.weight"][3, 5] = 1e6
    write_safetensors(tiny.folder / "model.safetensors", w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning must not reach the user either
        run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "model.safetensors: model.layers.1.mlp.up_proj.weight: values overflow F16; use --outtype f32")
    assert main(["--quiet", "--outtype", "f32", str(tiny.folder), str(tiny.predictor_dir)]) == 0


def test_bad_piece_type(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str]) -> None:
    pieces, scores, types = tiny_vocab()
    types[7] = 9
    write_sentencepiece_model(tiny.folder / "tokenizer.model", pieces, scores, types)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "tokenizer.model: piece 7: piece type 9 is not one of 1..6")


def use_tokenizer_json(t: TinyModel, model: dict) -> None:
    (t.folder / "tokenizer.model").unlink()
    (t.folder / "tokenizer.json").write_text(json.dumps({"model": model}))


@pytest.mark.parametrize("merge", ["ab", ["a"], ["a", "b", "c"], 5])
def test_malformed_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str], merge: object) -> None:
    t = make_model(tmp_path / "m")
    pieces = tiny_vocab()[0]
    use_tokenizer_json(t, {"type": "BPE", "byte_fallback": True, "vocab": {p: i for i, p in enumerate(pieces)}, "merges": ["▁ t", merge]})
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "tokenizer.json: model.merges: merge 1 is ", "not 'left right' or [left, right]")


@pytest.mark.parametrize("entry", ["b", ["b"], ["b", "x"], [3, 0.5]])
def test_malformed_unigram_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: object) -> None:
    t = make_model(tmp_path / "m")
    use_tokenizer_json(t, {"type": "Unigram", "vocab": [["a", 0.0], entry], "unk_id": 0})
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "tokenizer.json: model.vocab: Unigram entry 1 is ", "not [piece, score]")


@pytest.mark.parametrize("unk", [-1, 2, "0", True])
def test_unigram_unk_id_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str], unk: object) -> None:
    t = make_model(tmp_path / "m")
    use_tokenizer_json(t, {"type": "Unigram", "vocab": [["a", 0.0], ["b", -1.0]], "unk_id": unk})
    run_fails(capsys, tmp_path, [str(t.folder), str(t.predictor_dir)], "tokenizer.json: model.unk_id: unk_id ", "is not a piece id in 0..1")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_sparse_threshold(tmp_path: Path, tiny: TinyModel, capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert tiny.predictor_dir is not None
    (tiny.predictor_dir / "config.json").write_text('{"sparse_threshold": %s}' % value)
    run_fails(capsys, tmp_path, [str(tiny.folder), str(tiny.predictor_dir)], "config.json: sparse_threshold: sparse_threshold ", "is not a finite number")
