"""Shared fixtures: the bundled sample corpus, a model trained on it, and the real
public corpora.

The real corpora are unpacked once per test session into a temporary folder by the
project's own fetch script, from the mirror in $SPAMNB_CORPUS_MIRROR, else from the
shared archive folder beside the checkout (../shared/corpora, there in CI), else
from the corpora's original sites.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "corpora" / "sample"
SHARED_MIRROR = ROOT.parent / "shared" / "corpora"


def _load_fetch():
    spec = importlib.util.spec_from_file_location(
        "spamnb_corpora_fetch", ROOT / "corpora" / "fetch.py"
    )
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def corpus_mirror() -> Path | None:
    if os.environ.get("SPAMNB_CORPUS_MIRROR"):
        return Path(os.environ["SPAMNB_CORPUS_MIRROR"])
    return SHARED_MIRROR if SHARED_MIRROR.is_dir() else None


@pytest.fixture(scope="session")
def sample_maildir() -> Path:
    return SAMPLE / "maildir"


@pytest.fixture(scope="session")
def sample_mbox() -> Path:
    return SAMPLE / "mbox"


@pytest.fixture(scope="module")
def model(tmp_path_factory, sample_maildir) -> Path:
    """A model trained on the sample Maildir, one per test module (a module that
    changes its model defines its own)."""
    from cli_helpers import run

    path = tmp_path_factory.mktemp("model") / "model.joblib"
    result = run(
        "train", "-m", path, "--spam", sample_maildir / "spam", "--ham", sample_maildir / "ham"
    )
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="session")
def real_corpus(tmp_path_factory):
    """A function: corpus name -> {"spam": [dirs], "ham": [dirs]} of the unpacked corpus."""
    fetch = _load_fetch()
    dest = tmp_path_factory.mktemp("corpora")
    unpacked: dict[str, dict[str, list[Path]]] = {}
    # A failure once is a failure for the session: each corpus test tried the download
    # again, up to a minute a test on a network that drops packets.
    failed: dict[str, str] = {}

    def get(name: str) -> dict[str, list[Path]]:
        if name in failed:
            pytest.fail(failed[name])
        if name not in unpacked:
            try:
                root = fetch.fetch(name, dest, mirror=corpus_mirror())
            except fetch.FetchError as exc:
                failed[name] = (
                    f"{exc} (the real-corpus tests read the archives in $SPAMNB_CORPUS_MIRROR "
                    f"or {SHARED_MIRROR}; pytest -m 'not corpus' runs the others)"
                )
                pytest.fail(failed[name])
            unpacked[name] = fetch.labelled_dirs(name, root)
        return unpacked[name]

    return get
