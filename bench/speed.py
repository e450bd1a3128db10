"""Speed and memory against peers: spamnb, bogofilter and scikit-learn in one run.

Every tool reads the same bytes from the same files: the SpamAssassin corpus split as
bench/accuracy.py splits it (byte-identical duplicates dropped, then spamnb's
`stratified_split(labels, 0.3, seed=0)`), copied once into a temporary directory as
train/{spam,ham}/ and test/{spam,ham}/, one message per file.

Measured, each command in a process of its own (peak RSS is the process's ru_maxrss as
os.wait4 reports it; wall and CPU times from the same call):

* train wall time: the whole command, from start-up to the model on disk;
* batch classification rate: test messages / wall time of one command over all of them;
* peak RSS of each;
* pipe latency: one process per message (`spamnb classify --pipe`, `bogofilter -p -e`)
  against the floor any Python filter pays (interpreter start-up plus the standard
  library's email parse; bench/pipe_latency.py's FLOOR), alternating, medians.

How each tool runs:

* spamnb: `spamnb train --new -m MODEL --spam train/spam --ham train/ham`, then
  `spamnb classify -m MODEL test/spam test/ham`, from the benchmark's own venv with a
  regular install of this checkout (bench/pipe_latency.py's build/bench/venv). When
  `spamnb train --help` lists --jobs, `--jobs 1` is measured as well.
* bogofilter (Debian's package, installed by bench/peers.sh): streaming bulk mode with
  the file names on stdin, `bogofilter -C -d DB -s -b < spam-files` then `-n -b <
  ham-files` into a fresh database (train time is the sum of the two), and `bogofilter
  -C -d DB -t -b < test-files` to classify. (A plain directory is neither Maildir nor
  MH, so `-B DIR` would register nothing; `-B FILES...` was measured no faster.)
* scikit-learn: CountVectorizer + MultinomialNB at their defaults over the Subject and
  the decoded text parts (bench/accuracy.py's message_text), run by this script as a
  subprocess of its own in the same venv: training parses the mail, fits and saves the
  model with joblib; classifying loads it, parses the test mail and predicts.

Times are the best (minimum) of --runs runs (default 3); peak RSS is the largest over
those runs. Prints one table and writes build/bench/speed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# bench/ is on sys.path when a script in it runs.
import accuracy
import pipe_latency

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "bench"
CORPUS = "spamassassin"
FLOOR_NAME = "python + email parse (floor)"

# (measure, peer) -> (comparison, bound) for the ratio spamnb/peer, from the issue.
TARGETS: dict[tuple[str, str], tuple[str, float]] = {
    ("train_wall_s", "bogofilter"): ("<=", 1.5),
    ("train_wall_s", "scikit-learn"): ("<=", 1.0),
    ("classify_msg_per_s", "bogofilter"): (">=", 1.0),
    ("pipe_ms", "floor"): ("<=", pipe_latency.TARGET),
}


def log(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


# --- measuring one command --------------------------------------------------------------


def _ppid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces; the fields follow it.
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(entry)
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples a process tree every `interval` s: how many processes it had at most and,
    when it had more than one, the largest sum of their PSS (shared pages counted once).
    ru_maxrss is exact but per process; a command that forks workers needs the sum."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.stop_event = threading.Event()
        self.max_procs = 1
        self.max_tree_pss_kb = 0

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            pids = _descendants(self.pid)
            self.max_procs = max(self.max_procs, len(pids))
            if len(pids) > 1:
                self.max_tree_pss_kb = max(self.max_tree_pss_kb, sum(map(_pss_kb, pids)))

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


class TimedOut(Exception):
    """A measured command ran past its time limit and was killed."""


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system, the process and every child it waited for
    max_rss_mb: float  # ru_maxrss: the largest single process of the command
    procs: int  # most processes seen at once (sampled)
    tree_pss_mb: float | None  # peak sum of PSS over the tree, when it had > 1 process


def measure(
    command: Sequence[Any],
    stdin: Path | None = None,
    stdout: Path | None = None,
    ok: Sequence[int] = (0,),
    timeout: float | None = None,
) -> Run:
    """Run one command in a process of its own; its wall, CPU and peak memory."""
    argv = [str(part) for part in command]
    with (
        open(stdin or os.devnull, "rb") as fin,
        open(stdout or os.devnull, "wb") as fout,
        tempfile.TemporaryFile() as ferr,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=ferr)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        killer = threading.Timer(timeout, proc.kill) if timeout else None
        if killer:
            killer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if killer:
            killer.cancel()
            if timeout is not None and wall >= timeout:
                raise TimedOut(f"{argv[0]} killed after {timeout:.0f} s")
        if proc.returncode not in ok:
            ferr.seek(0)
            sys.stderr.write(ferr.read().decode("utf-8", "replace")[-4000:])
            raise SystemExit(f"{argv[0]} exited with {proc.returncode}: {' '.join(argv)}")
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mb=usage.ru_maxrss / 1024,
        procs=sampler.max_procs,
        tree_pss_mb=sampler.max_tree_pss_kb / 1024 if sampler.max_procs > 1 else None,
    )


def in_sequence(runs: Sequence[Run]) -> Run:
    """Commands run one after the other as one step: times add up, memory is the max."""
    pss = [r.tree_pss_mb for r in runs if r.tree_pss_mb is not None]
    return Run(
        wall_s=sum(r.wall_s for r in runs),
        cpu_s=sum(r.cpu_s for r in runs),
        max_rss_mb=max(r.max_rss_mb for r in runs),
        procs=max(r.procs for r in runs),
        tree_pss_mb=max(pss) if pss else None,
    )


def summarise(runs: list[Run], messages: int) -> dict[str, Any]:
    best = min(runs, key=lambda r: r.wall_s)
    pss = [r.tree_pss_mb for r in runs if r.tree_pss_mb is not None]
    return {
        "messages": messages,
        "wall_s": best.wall_s,
        "cpu_s": best.cpu_s,
        "msg_per_s": messages / best.wall_s,
        "max_rss_mb": max(r.max_rss_mb for r in runs),
        "procs": max(r.procs for r in runs),
        "tree_pss_mb": max(pss) if pss else None,
        "runs": [asdict(r) for r in runs],
    }


# --- the data ---------------------------------------------------------------------------


@dataclass
class Layout:
    base: Path
    train: dict[str, list[Path]]  # label -> files
    test: dict[str, list[Path]]

    def dir(self, part: str, label: str) -> Path:
        return self.base / part / label

    def count(self, part: str) -> int:
        return sum(len(files) for files in getattr(self, part).values())

    def test_files(self) -> list[Path]:
        return self.test["spam"] + self.test["ham"]


def corpus_root() -> tuple[Any, Path]:
    fetch = pipe_latency.fetch_module()
    mirror_env = os.environ.get("SPAMNB_CORPUS_MIRROR")
    mirror = Path(mirror_env) if mirror_env else ROOT.parent / "shared" / "corpora"
    root = fetch.fetch(
        CORPUS, WORK / "corpora", mirror=mirror if mirror.is_dir() else None, log=log
    )
    return fetch, root


def make_layout(base: Path) -> tuple[Layout, dict[str, int]]:
    """bench/accuracy.py's split of the SpamAssassin corpus, copied under `base`."""
    from spamnb.scores import stratified_split

    fetch, root = corpus_root()
    kept, counts = accuracy.dedupe(accuracy.list_messages(fetch, CORPUS, root))
    ordered = kept["spam"] + kept["ham"]
    labels = [m.label for m in ordered]
    train_idx, test_idx = stratified_split(labels, accuracy.TEST_SIZE, seed=accuracy.SEED)
    layout = Layout(base, {"spam": [], "ham": []}, {"spam": [], "ham": []})
    for part, indices in (("train", train_idx), ("test", test_idx)):
        for label in ("spam", "ham"):
            layout.dir(part, label).mkdir(parents=True)
        for i in indices:
            m = ordered[i]
            target = layout.dir(part, m.label) / m.name
            shutil.copyfile(m.path, target)  # a real copy: every tool reads these bytes
            getattr(layout, part)[m.label].append(target)
    return layout, counts


# --- scikit-learn, run as a subprocess of this script -----------------------------------


def sklearn_worker(argv: list[str]) -> None:
    """`speed.py --sklearn train TRAINDIR MODEL` or `--sklearn classify MODEL DIR...`."""
    import joblib

    mode, rest = argv[0], argv[1:]
    if mode == "train":
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.naive_bayes import MultinomialNB

        train_dir, model = Path(rest[0]), Path(rest[1])
        texts, labels = [], []
        for label in ("spam", "ham"):
            for path in sorted((train_dir / label).iterdir()):
                texts.append(accuracy.message_text(path.read_bytes()))
                labels.append(label)
        vectorizer = CountVectorizer()
        classifier = MultinomialNB().fit(vectorizer.fit_transform(texts), labels)
        joblib.dump((vectorizer, classifier), model)
    elif mode == "classify":
        vectorizer, classifier = joblib.load(rest[0])
        paths = [p for d in rest[1:] for p in sorted(Path(d).iterdir())]
        texts = [accuracy.message_text(p.read_bytes()) for p in paths]
        predicted = classifier.predict(vectorizer.transform(texts))
        out = sys.stdout
        for path, label in zip(paths, predicted, strict=True):
            out.write(f"{label}\t{path}\n")
    else:
        raise SystemExit(f"unknown --sklearn mode {mode!r}")


# --- the tools ----------------------------------------------------------------------------


def lines_in(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def check_output(name: str, path: Path, expected: int) -> None:
    got = lines_in(path)
    if got != expected:
        raise SystemExit(f"{name} printed {got} verdicts for {expected} test messages")


def has_jobs(spamnb: Path, command: str) -> bool:
    out = subprocess.run([str(spamnb), command, "--help"], capture_output=True, text=True)
    return "--jobs" in out.stdout


def bench_spamnb(
    layout: Layout, scratch: Path, spamnb: Path, runs: int, jobs: list[str]
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    model_dir = scratch / "model"
    model = model_dir / "model.joblib"
    train_runs, classify_runs = [], []
    out = scratch / "classify.out"
    train_cmd = [
        spamnb,
        "train",
        "--new",
        "-m",
        model,
        *jobs,
        "--spam",
        layout.dir("train", "spam"),
        "--ham",
        layout.dir("train", "ham"),
    ]
    classify_jobs = jobs if jobs and has_jobs(spamnb, "classify") else []
    classify_cmd = [
        spamnb,
        "classify",
        "-m",
        model,
        *classify_jobs,
        layout.dir("test", "spam"),
        layout.dir("test", "ham"),
    ]
    for i in range(runs):
        shutil.rmtree(model_dir, ignore_errors=True)
        model_dir.mkdir(parents=True)
        train_runs.append(measure(train_cmd))
        classify_runs.append(measure(classify_cmd, stdout=out, ok=(0, 1)))
        check_output("spamnb classify", out, layout.count("test"))
        log(
            f"spamnb{' ' + ' '.join(jobs) if jobs else ''} run {i + 1}: "
            f"train {train_runs[-1].wall_s:.2f} s, classify {classify_runs[-1].wall_s:.2f} s"
        )
    return (
        summarise(train_runs, layout.count("train")),
        summarise(classify_runs, layout.count("test")),
        model,
    )


BOGOFILTER = ["bogofilter", "-C"]  # -C: no config file can change the defaults measured


def bench_bogofilter(
    layout: Layout, scratch: Path, runs: int
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    lists = {}
    for name, files in (
        ("spam", layout.train["spam"]),
        ("ham", layout.train["ham"]),
        ("test", layout.test_files()),
    ):
        lists[name] = scratch / f"{name}.list"
        lists[name].write_text("".join(f"{p}\n" for p in files))
    db = scratch / "db"
    out = scratch / "classify.out"
    train_runs, classify_runs = [], []
    for i in range(runs):
        shutil.rmtree(db, ignore_errors=True)
        db.mkdir()
        train_runs.append(
            in_sequence(
                [
                    measure([*BOGOFILTER, "-d", db, "-s", "-b"], stdin=lists["spam"]),
                    measure([*BOGOFILTER, "-d", db, "-n", "-b"], stdin=lists["ham"]),
                ]
            )
        )
        # Bulk mode exits with the last message's verdict: 0 spam, 1 ham, 2 unsure.
        classify_runs.append(
            measure(
                [*BOGOFILTER, "-d", db, "-t", "-b"], stdin=lists["test"], stdout=out, ok=(0, 1, 2)
            )
        )
        check_output("bogofilter", out, layout.count("test"))
        log(
            f"bogofilter run {i + 1}: train {train_runs[-1].wall_s:.2f} s, "
            f"classify {classify_runs[-1].wall_s:.2f} s"
        )
    return (
        summarise(train_runs, layout.count("train")),
        summarise(classify_runs, layout.count("test")),
        db,
    )


def bench_sklearn(
    layout: Layout, scratch: Path, python: Path, runs: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    me = Path(__file__).resolve()
    model = scratch / "sklearn.joblib"
    out = scratch / "classify.out"
    train_runs, classify_runs = [], []
    for i in range(runs):
        model.unlink(missing_ok=True)
        train_runs.append(measure([python, me, "--sklearn", "train", layout.base / "train", model]))
        classify_runs.append(
            measure(
                [
                    python,
                    me,
                    "--sklearn",
                    "classify",
                    model,
                    layout.dir("test", "spam"),
                    layout.dir("test", "ham"),
                ],
                stdout=out,
            )
        )
        check_output("scikit-learn", out, layout.count("test"))
        log(
            f"scikit-learn run {i + 1}: train {train_runs[-1].wall_s:.2f} s, "
            f"classify {classify_runs[-1].wall_s:.2f} s"
        )
    return summarise(train_runs, layout.count("train")), summarise(
        classify_runs, layout.count("test")
    )


def bench_pipe(
    layout: Layout, commands: dict[str, list[Any]], messages: int, rounds: int
) -> dict[str, Any]:
    """bench/pipe_latency.py's protocol: the same messages, tools alternating."""
    chosen = random.Random(1).sample(sorted(layout.test_files()), messages)
    times: dict[str, list[float]] = {name: [] for name in commands}
    argvs = {name: [str(part) for part in command] for name, command in commands.items()}
    for _ in range(rounds):
        for message in chosen:
            for name, argv in argvs.items():
                times[name].append(pipe_latency.timed(argv, message))
    return {
        "messages": messages,
        "rounds": rounds,
        "median_ms": {name: statistics.median(t) * 1000 for name, t in times.items()},
        "p90_ms": {name: statistics.quantiles(t, n=10)[-1] * 1000 for name, t in times.items()},
    }


# --- the report ---------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cores": os.cpu_count(), "python": platform.python_version()}
    with contextlib.suppress(OSError, ValueError):
        info["nproc"] = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout)
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    info["cpu"] = model.group(1).strip() if model else platform.processor()
    meminfo = Path("/proc/meminfo").read_text()
    total = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.M)
    if total:
        info["memory_gib"] = round(int(total.group(1)) / 1024**2, 1)
    info["kernel"] = platform.release()
    info["loadavg_at_start"] = os.getloadavg()
    return info


def source_state() -> str:
    """The commit the benchmarked spamnb was installed from, and whether it had edits."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return "unknown"
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "spamnb", "pyproject.toml"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")


def versions(python: Path, peers: bool = True) -> dict[str, str]:
    script = (
        "from importlib.metadata import version\n"
        "for name in ('spamnb', 'numpy', 'scipy', 'scikit-learn'):\n"
        "    print(name, version(name))\n"
    )
    out = subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=True)
    found = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    found["spamnb source"] = source_state()
    if peers:
        bogo = subprocess.run(["bogofilter", "-V"], capture_output=True, text=True)
        version = re.search(r"version\s+(\S+)", bogo.stdout + bogo.stderr)
        found["bogofilter"] = version.group(1) if version else "?"
    found["python (bench venv)"] = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return found


def ratio_cell(measure: str, peer: str, ours: float | None, theirs: float | None) -> dict:
    if ours is None or theirs is None or not theirs:
        return {"ratio": None}
    cell: dict[str, Any] = {"ratio": ours / theirs}
    target = TARGETS.get((measure, peer))
    if target:
        op, bound = target
        cell["target"] = f"{op} {bound:g}"
        cell["pass"] = cell["ratio"] <= bound if op == "<=" else cell["ratio"] >= bound
    return cell


ROWS = [
    # key, label, format, which summary, field
    ("train_wall_s", "train wall (s, best)", "{:.2f}", "train", "wall_s"),
    ("train_cpu_s", "train CPU user+sys (s)", "{:.2f}", "train", "cpu_s"),
    ("train_rss_mb", "train peak RSS (MB)", "{:.0f}", "train", "max_rss_mb"),
    ("classify_msg_per_s", "classify rate (msg/s, best)", "{:,.0f}", "classify", "msg_per_s"),
    ("classify_cpu_s", "classify CPU user+sys (s)", "{:.2f}", "classify", "cpu_s"),
    ("classify_rss_mb", "classify peak RSS (MB)", "{:.0f}", "classify", "max_rss_mb"),
    ("pipe_ms", "pipe latency (ms, median)", "{:.1f}", "pipe", None),
]


def build_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]], list[list[str]]]:
    tools = report["tools"]
    columns = [*tools.keys(), "floor"]
    values: dict[str, dict[str, float | None]] = {}
    for key, _label, _fmt, part, field in ROWS:
        values[key] = {}
        for tool in columns:
            if part == "pipe":
                values[key][tool] = report["pipe"]["median_ms"].get(tool)
            elif tool in tools:
                values[key][tool] = tools[tool][part][field]
            else:
                values[key][tool] = None
        # Sampled sum over a process tree, when a tool forked workers.
        if field == "max_rss_mb":
            for tool in tools:
                pss = tools[tool][part]["tree_pss_mb"]
                if pss is not None:
                    values[key][tool + " (all processes)"] = pss
    header = ["measure", *columns]
    rows = []
    for key, label, fmt, _part, _field in ROWS:
        cells = [label]
        for tool in columns:
            v = values[key].get(tool)
            cell = "—" if v is None else fmt.format(v)
            pss = values[key].get(tool + " (all processes)")
            if pss is not None:
                cell += f" ({pss:.0f} all procs)"
            cells.append(cell)
        rows.append(cells)
    # Ratios of every spamnb variant against every peer.
    ratio_rows = []
    peers = [t for t in tools if not t.startswith("spamnb")] + ["floor"]
    report["ratios"] = {}
    for ours in (t for t in tools if t.startswith("spamnb")):
        for key, label, _fmt, _part, _field in ROWS:
            cells = [f"{ours}: {label.split(' (')[0]}"]
            for peer in peers:
                cell = ratio_cell(key, peer, values[key].get(ours), values[key].get(peer))
                report["ratios"].setdefault(ours, {}).setdefault(key, {})[peer] = cell
                if cell["ratio"] is None:
                    cells.append("—")
                    continue
                text = f"{cell['ratio']:.2f}"
                if "target" in cell:
                    text += f" (target {cell['target']}: {'PASS' if cell['pass'] else 'MISS'})"
                cells.append(text)
            if any(c != "—" for c in cells[1:]):
                ratio_rows.append(cells)
    ratio_header = ["spamnb / peer", *peers]
    return header, rows, [ratio_header, *ratio_rows]


def aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), "-" * (sum(widths) + 2 * (len(widths) - 1)), *map(line, rows)]


def markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def render(report: dict[str, Any]) -> tuple[str, str]:
    header, rows, (ratio_header, *ratio_rows) = build_table(report)
    split = report["split"]
    title = (
        f"SpamAssassin corpus, train {split['train']:,} / test {split['test']:,} messages "
        f"(stratified_split 0.3, seed 0); times best of {report['runs']} runs, "
        f"peak RSS the largest of them; pipe latency median of "
        f"{report['pipe']['messages'] * report['pipe']['rounds']} runs per tool"
    )
    text = [title, "", *aligned(header, rows), "", *aligned(ratio_header, ratio_rows)]
    md = [title, "", *markdown(header, rows), "", *markdown(ratio_header, ratio_rows)]
    return "\n".join(text), "\n".join(md)


# --- the run ------------------------------------------------------------------------------


def pip_install(python: Path) -> list[str]:
    return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


def ensure_sklearn(python: Path) -> None:
    if subprocess.run([str(python), "-c", "import sklearn"], capture_output=True).returncode:
        log("installing scikit-learn into the bench venv")
        subprocess.run(
            [*pip_install(python), "scikit-learn"],
            check=True,
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--sklearn":
        sklearn_worker(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per timing (best kept)")
    parser.add_argument("--pipe-messages", type=int, default=20)
    parser.add_argument("--pipe-rounds", type=int, default=5)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run `spamnb train` once under cProfile and print where its time goes",
    )
    parser.add_argument("--output", type=Path, default=WORK / "speed.json")
    args = parser.parse_args()

    started = time.perf_counter()
    WORK.mkdir(parents=True, exist_ok=True)
    accuracy.prepare_peers(["bogofilter"])
    log("installing spamnb from this checkout into the bench venv")
    venv = pipe_latency.bench_venv()
    python, spamnb = venv / "bin" / "python", venv / "bin" / "spamnb"
    ensure_sklearn(python)

    report: dict[str, Any] = {
        "machine": machine(),
        "versions": versions(python),
        "runs": args.runs,
        "tools": {},
    }
    with tempfile.TemporaryDirectory(prefix="spamnb-speed-") as tmp:
        tmp_path = Path(tmp)
        layout, dedupe = make_layout(tmp_path / "mail")
        report["split"] = {
            "corpus": CORPUS,
            "train": layout.count("train"),
            "test": layout.count("test"),
            "train_by_label": {k: len(v) for k, v in layout.train.items()},
            "test_by_label": {k: len(v) for k, v in layout.test.items()},
            "duplicates_dropped": dedupe["dropped"],
        }
        log(f"split: train {layout.count('train'):,}, test {layout.count('test'):,}")

        variants = [("spamnb", [])]
        if has_jobs(spamnb, "train"):
            variants.append(("spamnb --jobs 1", ["--jobs", "1"]))
        model = None
        for name, jobs in variants:
            scratch = tmp_path / name.replace(" ", "_")
            train, classify, trained = bench_spamnb(layout, scratch, spamnb, args.runs, jobs)
            report["tools"][name] = {"train": train, "classify": classify}
            model = model or trained
        scratch = tmp_path / "bogofilter"
        scratch.mkdir()
        train, classify, db = bench_bogofilter(layout, scratch, args.runs)
        report["tools"]["bogofilter"] = {"train": train, "classify": classify}
        scratch = tmp_path / "sklearn"
        scratch.mkdir()
        train, classify = bench_sklearn(layout, scratch, python, args.runs)
        report["tools"]["scikit-learn"] = {"train": train, "classify": classify}

        log("pipe latency")
        report["pipe"] = bench_pipe(
            layout,
            {
                "floor": [python, "-c", pipe_latency.FLOOR],
                "spamnb": [spamnb, "classify", "--pipe", "-m", model],
                "bogofilter": [*BOGOFILTER, "-d", db, "-p", "-e"],
            },
            args.pipe_messages,
            args.pipe_rounds,
        )
        if args.profile:
            report["profile"] = profile_train(layout, tmp_path, python, spamnb)

    report["seconds"] = round(time.perf_counter() - started, 1)
    text, md = render(report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    args.output.with_suffix(".md").write_text(md + "\n", encoding="utf-8")
    m = report["machine"]
    print(text)
    print()
    print(
        f"machine: {m['cpu']}, {m.get('nproc', m['cores'])} cores, "
        f"{m.get('memory_gib', '?')} GiB, load average at start "
        f"{' '.join(f'{x:.2f}' for x in m['loadavg_at_start'])}"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    if "profile" in report:
        print()
        print(report["profile"])
    log(f"done in {report['seconds']:.0f} s; results in {args.output} (and .md)")


def profile_train(layout: Layout, tmp: Path, python: Path, spamnb: Path) -> str:
    """cProfile sees one process only: with --jobs, profile `--jobs 1` so that the
    reading and tokenizing done by workers otherwise shows up."""
    stats = tmp / "train.prof"
    model = tmp / "profile" / "model.joblib"
    model.parent.mkdir()
    jobs = ["--jobs", "1"] if has_jobs(spamnb, "train") else []
    log(f"profiling spamnb train {' '.join(jobs)}")
    subprocess.run(
        [
            str(python),
            "-m",
            "cProfile",
            "-o",
            str(stats),
            "-m",
            "spamnb",
            "train",
            "--new",
            "-m",
            str(model),
            *jobs,
            "--spam",
            str(layout.dir("train", "spam")),
            "--ham",
            str(layout.dir("train", "ham")),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    script = (
        "import pstats, sys\n"
        "s = pstats.Stats(sys.argv[1]); s.sort_stats('tottime').print_stats(20)\n"
    )
    out = subprocess.run(
        [str(python), "-c", script, str(stats)], capture_output=True, text=True, check=True
    )
    shutil.copyfile(stats, WORK / "train.prof")
    listing = out.stdout.split("\n", 3)[-1].strip("\n")
    title = f"spamnb train {' '.join(jobs)} under cProfile (top 20 by own time):"
    return title + "\n" + listing


if __name__ == "__main__":
    main()
