"""Training at scale: `spamnb train --new` on 25k, 50k and 100k messages.

The messages are the SpamAssassin corpus (every file of it, in a seeded shuffled order)
repeated until there are enough, each copy made distinct the way real mail is: a new
Received line on top (relay host, IP address and queue id of its own), a new Message-ID
and Date, and the Subject with a counter appended. So every message is new to spamnb
(which learns a message once, by its Message-ID and body), and the vocabulary keeps
growing with the unique ids and addresses, while the bodies repeat.

They are written one message per file, in chunks of 25k (chunk k in chunk<k>/spam and
chunk<k>/ham), under a temporary directory that is deleted at the end (about 0.7 GB for
100k). Each size trains a new model on the first size/25k chunks, in a process of its
own: its wall and CPU time and peak RSS (bench/speed.py's measure). One run per size.

Reported: messages/second, and the deviation from linear, time(N)/time(25k)/(N/25k) - 1,
for wall and for CPU time (the CPU time is the steadier on a shared machine). Targets
from the issue: peak RSS under 600 MB at 100k, and within 10% of linear.
Writes build/bench/scale.json (and scale.md).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

# bench/ is on sys.path when a script in it runs.
import accuracy
import pipe_latency
import speed

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "bench"
RSS_TARGET_MB = 600
LINEAR_TARGET = 0.10
EPOCH = datetime(2002, 1, 1, tzinfo=timezone.utc)
TLDS = ("com", "net", "org", "de", "co.uk", "fr", "nl", "jp", "br", "info")


def log(text: str) -> None:
    print(f"[bench-scale] {text}", file=sys.stderr, flush=True)


# --- making the messages ----------------------------------------------------------------


def split_header(raw: bytes) -> tuple[bytes, bytes, bytes]:
    """(header, newline, body): the header block up to its blank line."""
    for newline in (b"\n", b"\r\n"):
        at = raw.find(newline + newline)
        if at >= 0 and (newline == b"\r\n" or raw[at - 1 : at] != b"\r"):
            return raw[: at + len(newline)], newline, raw[at + len(newline) :]
    return raw, b"\n", b""


def fields_of(header: bytes) -> list[bytes]:
    """Header lines with their continuation lines, each field whole."""
    fields: list[bytes] = []
    for line in header.splitlines(keepends=True):
        if fields and line[:1] in (b" ", b"\t"):
            fields[-1] += line
        else:
            fields.append(line)
    return fields


def variant(raw: bytes, n: int, rng: random.Random) -> bytes:
    """Copy number n of a message: a Received line of its own on top, new Message-ID
    and Date, and the Subject with n appended; everything else byte for byte."""
    header, nl, body = split_header(raw)
    when = EPOCH + timedelta(seconds=n * 317 + rng.randrange(300))
    date = format_datetime(when).encode()
    relay = f"mx{rng.randrange(1, 40)}.relay{rng.randrange(20000)}.example.{rng.choice(TLDS)}"
    ip = ".".join(str(rng.randrange(1, 255)) for _ in range(4))
    queue_id = "".join(rng.choice("0123456789ABCDEF") for _ in range(10))
    received = (
        (
            f"Received: from {relay} ({relay} [{ip}]){nl.decode()}"
            f"\tby mail{rng.randrange(1, 9)}.bench.example (Postfix) with ESMTP id {queue_id}"
            f"{nl.decode()}\tfor <user{rng.randrange(500)}@bench.example>; "
        ).encode()
        + date
        + nl
    )
    message_id = f"<{n:06d}.{rng.getrandbits(48):012x}@{relay}>".encode()
    fields = fields_of(header)
    out: list[bytes] = []
    if fields and fields[0].startswith(b"From "):  # an mbox From_ line stays first
        out.append(fields.pop(0))
    out.append(received)
    seen: set[bytes] = set()
    for field in fields:
        name = field.split(b":", 1)[0].strip().lower()
        if name == b"message-id":
            field = b"Message-ID: " + message_id + nl
        elif name == b"date":
            field = b"Date: " + date + nl
        elif name == b"subject":
            field = field.rstrip(b"\r\n") + b" #%d" % n + nl
        seen.add(name)
        out.append(field)
    if b"message-id" not in seen:
        out.append(b"Message-ID: " + message_id + nl)
    if b"date" not in seen:
        out.append(b"Date: " + date + nl)
    if b"subject" not in seen:
        out.append(b"Subject: #%d" % n + nl)
    return b"".join(out) + nl + body


def generate(base: Path, total: int, chunk: int, seed: int = 0) -> dict[str, Any]:
    fetch, root = speed.corpus_root()
    by_label = accuracy.list_messages(fetch, speed.CORPUS, root)
    sources = [(m.label, m.path.read_bytes()) for ms in by_label.values() for m in ms]
    random.Random(seed).shuffle(sources)
    rng = random.Random(seed + 1)
    written = 0
    labels = {"spam": 0, "ham": 0}
    for n in range(total):
        label, raw = sources[n % len(sources)]
        folder = base / f"chunk{n // chunk}" / label
        if n % chunk == 0 or not folder.is_dir():
            for name in ("spam", "ham"):
                (base / f"chunk{n // chunk}" / name).mkdir(parents=True, exist_ok=True)
        data = variant(raw, n, rng)
        (folder / f"{n:06d}").write_bytes(data)
        written += len(data)
        labels[label] += 1
    return {
        "sources": len(sources),
        "messages": total,
        "bytes": written,
        "by_label": labels,
    }


# --- training ---------------------------------------------------------------------------


def train(spamnb: Path, base: Path, chunks: int, model: Path, timeout: float) -> speed.Run:
    spam = [base / f"chunk{k}" / "spam" for k in range(chunks)]
    ham = [base / f"chunk{k}" / "ham" for k in range(chunks)]
    command = [spamnb, "train", "--new", "-m", model, "--spam", *spam, "--ham", *ham]
    return speed.measure(command, timeout=timeout)


def render(report: dict[str, Any]) -> tuple[str, str]:
    header = [
        "messages",
        "train wall (s)",
        "CPU (s)",
        "msg/s (wall)",
        "peak RSS (MB)",
        "vs linear (wall)",
        "vs linear (CPU)",
        "model on disk (MB)",
    ]
    rows = []
    for r in report["results"]:
        if r.get("error"):
            rows.append([f"{r['messages']:,}", r["error"], *[""] * (len(header) - 2)])
            continue
        rss = f"{r['max_rss_mb']:.0f}"
        if r.get("tree_pss_mb") is not None:
            rss += f" ({r['tree_pss_mb']:.0f} all procs)"

        def dev(value: float | None) -> str:
            return "—" if value is None else f"{value:+.1%}"

        rows.append(
            [
                f"{r['messages']:,}",
                f"{r['wall_s']:.1f}",
                f"{r['cpu_s']:.1f}",
                f"{r['msg_per_s']:,.0f}",
                rss,
                dev(r.get("linear_deviation_wall")),
                dev(r.get("linear_deviation_cpu")),
                f"{r['model_mb']:.0f}",
            ]
        )
    verdicts = []
    for name, (value, ok, target) in report["targets"].items():
        verdicts.append(f"{name}: {value} (target {target}: {'PASS' if ok else 'MISS'})")
    title = (
        f"spamnb train --new on {report['generated']['messages']:,} generated messages "
        f"(the SpamAssassin corpus repeated with new headers), one run per size"
    )
    text = [title, "", *speed.aligned(header, rows), "", *verdicts]
    md = [title, "", *speed.markdown(header, rows), "", *(f"- {v}" for v in verdicts)]
    return "\n".join(text), "\n".join(md)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="25000,50000,100000",
        help="comma-separated numbers of messages to train on (default: 25000,50000,100000)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="give up on one training after this many s"
    )
    parser.add_argument("--output", type=Path, default=WORK / "scale.json")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    chunk = math.gcd(*sizes)
    started = time.perf_counter()
    WORK.mkdir(parents=True, exist_ok=True)
    log("installing spamnb from this checkout into the bench venv")
    venv = pipe_latency.bench_venv()
    spamnb = venv / "bin" / "spamnb"
    python = venv / "bin" / "python"
    report: dict[str, Any] = {
        "machine": speed.machine(),
        "versions": {
            k: v
            for k, v in speed.versions(python, peers=False).items()
            if k in ("spamnb", "spamnb source", "numpy", "scipy", "python (bench venv)")
        },
        "sizes": sizes,
        "chunk": chunk,
        "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="spamnb-scale-") as tmp:
        base = Path(tmp) / "mail"
        log(f"writing {sizes[-1]:,} messages in chunks of {chunk:,} under {base}")
        t0 = time.perf_counter()
        report["generated"] = generate(base, sizes[-1], chunk)
        report["generated"]["seconds"] = round(time.perf_counter() - t0, 1)
        log(
            f"wrote {report['generated']['bytes'] / 1e6:,.0f} MB in "
            f"{report['generated']['seconds']:.0f} s"
        )
        first: dict[str, float] = {}
        for size in sizes:
            model_dir = Path(tmp) / f"model-{size}"
            model_dir.mkdir()
            log(f"training on {size:,}")
            result: dict[str, Any] = {"messages": size}
            try:
                run = train(spamnb, base, size // chunk, model_dir / "model.joblib", args.timeout)
            except speed.TimedOut:
                result["error"] = f"gave up after {args.timeout:.0f} s"
                report["results"].append(result)
                log(result["error"])
                break
            result.update(speed.asdict(run))
            result["msg_per_s"] = size / run.wall_s
            result["model_mb"] = sum(f.stat().st_size for f in model_dir.iterdir()) / 2**20
            if not first:
                first = {"size": size, "wall": run.wall_s, "cpu": run.cpu_s}
            else:
                factor = size / first["size"]
                result["linear_deviation_wall"] = run.wall_s / first["wall"] / factor - 1
                result["linear_deviation_cpu"] = run.cpu_s / first["cpu"] / factor - 1
            shutil.rmtree(model_dir)
            report["results"].append(result)
            log(
                f"{size:,}: {run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU, "
                f"{run.max_rss_mb:.0f} MB peak RSS"
            )
    done = [r for r in report["results"] if not r.get("error")]
    largest = done[-1] if done else None
    report["targets"] = {}
    if largest:
        report["targets"][f"peak RSS at {largest['messages']:,}"] = (
            f"{largest['max_rss_mb']:.0f} MB",
            largest["max_rss_mb"] < RSS_TARGET_MB,
            f"< {RSS_TARGET_MB} MB",
        )
        for r in done[1:]:
            dev = r["linear_deviation_wall"]
            report["targets"][f"wall time vs linear at {r['messages']:,}"] = (
                f"{dev:+.1%}",
                dev <= LINEAR_TARGET,
                f"<= +{LINEAR_TARGET:.0%}",
            )
    report["seconds"] = round(time.perf_counter() - started, 1)
    text, md = render(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    args.output.with_suffix(".md").write_text(md + "\n", encoding="utf-8")
    print(text)
    m = report["machine"]
    print(f"\nmachine: {m['cpu']}, {m.get('nproc', m['cores'])} cores, {m['memory_gib']} GiB")
    log(f"done in {report['seconds']:.0f} s; results in {args.output} (and .md)")


if __name__ == "__main__":
    main()
