"""Helpers for the tests that open HTML reports in headless Chromium (Debian 'chromium')."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest


class Elements(HTMLParser):
    """Every start tag of a page with its attributes, in document order."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def ids(self) -> list[str]:
        return [attrs["id"] for _, attrs in self.tags if attrs.get("id")]

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def find_chromium() -> str:
    """The browser's path; a skip where it is not installed, a failure in CI."""
    binary = shutil.which("chromium")
    if binary:
        return binary
    if os.environ.get("CI"):
        pytest.fail("chromium is not on PATH: .ci/run installs the Debian package 'chromium'")
    pytest.skip("headless Chromium is not installed (apt-get install chromium)")


def run_chromium(binary: str, profile: Path, *args: str) -> str:
    result = subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            # Lets the page's load handler finish before the DOM is dumped.
            "--virtual-time-budget=5000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def browser_dom(binary: str, profile: Path, path: Path) -> Elements:
    """The DOM as headless Chromium left it after loading the page at ``path``."""
    return Elements(run_chromium(binary, profile, "--dump-dom", path.as_uri()))


def screenshot(binary: str, profile: Path, path: Path, png: Path, height: int = 3000) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    run_chromium(
        binary,
        profile,
        "--hide-scrollbars",
        f"--screenshot={png}",
        f"--window-size=1200,{height}",
        path.as_uri(),
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])
