"""Tokenizer and detokenizer through the binding, against the ids the real sentencepiece library
gives with the fixture's vocabulary (tests/data/relu-llama-kjv.vocab.gguf.out)."""

from __future__ import annotations

import pytest

import powerinfer


def test_a_verse_tokenizes_to_the_known_ids_with_bos(model: powerinfer.Model) -> None:
    assert model.tokenize("And God said") == [1, 300, 395, 392]


def test_add_bos_false_leaves_out_the_bos_token(model: powerinfer.Model) -> None:
    assert model.tokenize("And God said", add_bos=False) == [300, 395, 392]


@pytest.mark.parametrize(
    "text",
    [
        "Hello world",
        "Once upon a time,\nthere was a cat.",
        "héllo wörld 🙂 日本語",
        "  two  spaces",
    ],
)
def test_detokenize_inverts_tokenize(model: powerinfer.Model, text: str) -> None:
    assert model.detokenize(model.tokenize(text)) == text


def test_token_to_piece_gives_the_bytes_of_one_token(model: powerinfer.Model) -> None:
    assert model.token_to_piece(300) == b" And"


def test_special_tokens_are_reported_in_the_model_info(model: powerinfer.Model) -> None:
    assert (model.info.bos, model.info.eos, model.info.newline) == (1, 2, 13)


def test_detokenize_rejects_an_id_outside_the_vocabulary(model: powerinfer.Model) -> None:
    with pytest.raises(powerinfer.InvalidArgumentError):
        model.detokenize([1, model.n_vocab])
