"""Pipe-filter latency: `spamnb classify --pipe < message` against the interpreter floor.

procmail starts the filter once per message, so its start-up is its speed.  The
floor is what any Python mail filter pays: starting the interpreter and parsing the
message with the standard library.  Both are timed in the same run, alternating, on
the same messages, with a model trained on the whole SpamAssassin corpus, and the
ratio of the medians is printed (target: at most 1.5).

spamnb runs from a venv of its own with a regular (not editable) install, as a user
would have it: an editable install adds an import hook to every start.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "bench"
TARGET = 1.5
FLOOR = "import sys, email; email.message_from_binary_file(sys.stdin.buffer)"


def fetch_module():
    spec = importlib.util.spec_from_file_location(
        "spamnb_corpora_fetch", ROOT / "corpora" / "fetch.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def bench_venv() -> Path:
    venv = WORK / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--force-reinstall",
            "--no-deps",
            str(ROOT),
        ],
        check=True,
    )
    # Dependencies once; the package itself fresh every run.
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)], check=True
    )
    return venv


def timed(command: list[str], message: Path) -> float:
    with message.open("rb") as stdin:
        start = time.perf_counter()
        subprocess.run(command, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    WORK.mkdir(parents=True, exist_ok=True)
    fetch = fetch_module()
    mirror = os.environ.get("SPAMNB_CORPUS_MIRROR") or ROOT.parent / "shared" / "corpora"
    root = fetch.fetch(
        "spamassassin", WORK / "corpora", mirror=Path(mirror) if Path(mirror).is_dir() else None
    )
    dirs = fetch.labelled_dirs("spamassassin", root)
    venv = bench_venv()
    spamnb = str(venv / "bin" / "spamnb")
    python = str(venv / "bin" / "python")
    model = WORK / "model.joblib"
    subprocess.run(
        [
            spamnb,
            "train",
            "--new",
            "-m",
            str(model),
            "--spam",
            *map(str, dirs["spam"]),
            "--ham",
            *map(str, dirs["ham"]),
        ],
        check=True,
    )
    files = sorted(p for d in dirs["spam"] + dirs["ham"] for p in d.iterdir() if p.is_file())
    chosen = random.Random(1).sample(files, args.messages)
    floor_times, spamnb_times = [], []
    pipe = [spamnb, "classify", "--pipe", "-m", str(model)]
    for _ in range(args.rounds):
        for message in chosen:
            floor_times.append(timed([python, "-c", FLOOR], message))
            spamnb_times.append(timed(pipe, message))
    floor = statistics.median(floor_times)
    ours = statistics.median(spamnb_times)
    ratio = ours / floor
    runs = len(floor_times)
    print(f"pipe latency over {runs} runs of {len(chosen)} SpamAssassin messages (medians):")
    print(f"  interpreter + email parse floor  {floor * 1000:7.1f} ms")
    print(f"  spamnb classify --pipe           {ours * 1000:7.1f} ms")
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"  ratio spamnb/floor               {ratio:7.2f}  ({verdict} the target of {TARGET})")


if __name__ == "__main__":
    main()
