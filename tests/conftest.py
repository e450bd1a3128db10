"""Shared fixtures: the bundled sample corpus and the real public corpora.

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


@pytest.fixture(scope="session")
def real_corpus(tmp_path_factory):
    """A function: corpus name -> {"spam": [dirs], "ham": [dirs]} of the unpacked corpus."""
    fetch = _load_fetch()
    dest = tmp_path_factory.mktemp("corpora")
    unpacked: dict[str, dict[str, list[Path]]] = {}

    def get(name: str) -> dict[str, list[Path]]:
        if name not in unpacked:
            root = fetch.fetch(name, dest, mirror=corpus_mirror())
            unpacked[name] = fetch.labelled_dirs(name, root)
        return unpacked[name]

    return get
