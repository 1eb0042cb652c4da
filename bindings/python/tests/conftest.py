"""Fixtures: a tiny synthetic model over the real Llama vocabulary, made once per session.

The suite tests the installed `powerinfer` package; run it from outside the source tree.
The vocabulary comes from $PI_TEST_DATA or ../shared/data beside the repository; without it the
tests are skipped, except under CI=true where that is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

import powerinfer

REPO_ROOT = Path(__file__).resolve().parents[3]
VOCAB_NAME = "ggml-vocab-llama-spm.gguf"
# Small enough for fast tests (about 3 ms per token with scalar kernels), real vocabulary.
TINY = dict(n_embd=64, n_layer=2, n_head=4, n_ff=176, seed=7)


def pytest_report_header(config: pytest.Config) -> str:
    return f"powerinfer {powerinfer.__version__} from {Path(powerinfer.__file__).parent}"


def _data_dir() -> Path:
    given = os.environ.get("PI_TEST_DATA")
    return Path(given) if given else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def vocab_path() -> Path:
    path = _data_dir() / VOCAB_NAME
    if not path.is_file():
        message = f"{path} is missing (set PI_TEST_DATA to the folder holding {VOCAB_NAME})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


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
