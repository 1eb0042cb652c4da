"""The converter's own reader of tokenizer.model against the sentencepiece package, on a model that
package trains (skipped where sentencepiece is not installed; the converter does not need it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerinfer.convert.sentencepiece_model import read_sentencepiece_model

TEXT = "In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep.\n" * 40


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_pieces_scores_types_match_sentencepiece(tmp_path: Path, model_type: str) -> None:
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT + "Ünïcödé – naïve café 日本\n")
    prefix = tmp_path / "sp"
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(prefix), vocab_size=300, model_type=model_type,
        byte_fallback=True, user_defined_symbols=["<tool>"], control_symbols=["<ctl>"], pad_id=3, character_coverage=1.0,
    )
    proc = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    ours = read_sentencepiece_model(Path(str(prefix) + ".model"))
    n = proc.get_piece_size()
    assert ours.pieces == [proc.id_to_piece(i) for i in range(n)]
    assert ours.scores == pytest.approx([proc.get_score(i) for i in range(n)])

    def kind(i: int) -> int:
        if proc.is_unknown(i):
            return 2
        if proc.is_control(i):
            return 3
        if proc.is_unused(i):
            return 5
        if proc.is_byte(i):
            return 6
        return 4 if proc.id_to_piece(i) == "<tool>" else 1

    assert ours.types == [kind(i) for i in range(n)]
    assert ours.special_ids == {"unk": proc.unk_id(), "bos": proc.bos_id(), "eos": proc.eos_id(), "pad": proc.pad_id()}


def test_engine_tokenizes_like_sentencepiece(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    import powerinfer
    from powerinfer.convert import convert

    from convert_fixtures import make_model

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    prefix = tmp_path / "sp"
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(prefix), vocab_size=300, model_type="bpe", byte_fallback=True, character_coverage=1.0)
    t = make_model(tmp_path / "m")
    (t.folder / "tokenizer.model").write_bytes(Path(str(prefix) + ".model").read_bytes())
    out = convert(t.folder, t.predictor_dir)
    proc = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    with powerinfer.Model(out, n_threads=1) as model:
        for text in ("And God said, Let there be light: and there was light.", "the deep waters, zebra 42 ü"):
            assert model.tokenize(text, add_bos=True) == [proc.bos_id(), *proc.encode(text)]
