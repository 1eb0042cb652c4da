"""Fixtures: a tiny synthetic model over a real vocabulary, made once per session.

The suite tests the installed `powerinfer` package; run it from outside the source tree.
The vocabulary is the really-trained fixture's own SentencePiece vocabulary, 4096 tokens, kept in
the repository as tests/data/relu-llama-kjv.vocab.gguf (docs/fixture.md, docs/test-data.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

import powerinfer

REPO_ROOT = Path(__file__).resolve().parents[3]
VOCAB = REPO_ROOT / "tests" / "data" / "relu-llama-kjv.vocab.gguf"
# Small enough for fast tests (about 3 ms per token with scalar kernels), real vocabulary.
TINY = dict(n_embd=64, n_layer=2, n_head=4, n_ff=176, seed=7)


def pytest_report_header(config: pytest.Config) -> str:
    return f"powerinfer {powerinfer.__version__} from {Path(powerinfer.__file__).parent}"


@pytest.fixture(scope="session")
def vocab_path() -> Path:
    return VOCAB


@pytest.fixture(scope="session")
def model_path(tmp_path_factory: pytest.TempPathFactory, vocab_path: Path) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny.gguf"
    powerinfer.make_synthetic_model(path, vocab_path, **TINY)
    return path


@pytest.fixture(scope="session")
def model(model_path: Path) -> Iterator[powerinfer.Model]:
    with powerinfer.Model(model_path, n_threads=2) as m:
        yield m


@pytest.fixture
def ctx(model: powerinfer.Model) -> Iterator[powerinfer.Context]:
    with model.create_context(n_ctx=512) as c:
        yield c
