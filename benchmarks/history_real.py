"""This repository's own history through `bench history` (issue 73, item 4): each listed commit checked out in a
worktree of its own and run as CI would have run it on this machine, one results folder a commit (OUT/NN-SHA/), then
`python -m bench history OUT` reads the series.

    python benchmarks/history_real.py --out results/history-cpu/real [--commits SHA,SHA,...] [--repeats 2]
    python benchmarks/history_real.py --out results/history-cpu/real --duets 0c0ae1b,b88bcf7 [--duet-repeats 5]

--duets: for those commits, the A/B CI would have run on a push, each against the commit before in duets (as
`bench regress --against`: bench.regress.duets), into the commit's folder: its verdict.json (which `bench history`
puts beside the commit), and the duets' rows under ab/ (the series keeps the commit's own runs, timed alone).

Every commit runs with this interpreter (its dependencies are the ones of this environment, not of its day) and a
copy of the dataset cache, so that an older tree cannot rewrite the cache others share. A commit whose folder holds
its rows already is skipped: a stopped run goes on where it stopped."""
from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import REPO_ROOT
from bench.regress import compare, duets
from bench.regress.duets import worktree

log = logging.getLogger("history_real")
# Around the TensorFlow fast-path commit (0c0ae1b: TF_ENABLE_ONEDNN_OPTS=1) and around the inter-op pool fix
# (b88bcf7: tf-single keeps TensorFlow's one inter-op thread), then the fused optimizer (f852bab, on CUDA only).
COMMITS = ("7ef98c4 8b8390e a330f3f 5302261 0e99d86 0c0ae1b bda007a 9a66be4 a44b58b 7465312 "
           "412e911 c194c98 cac03dc d8ce609 9d0bb88 b88bcf7 f852bab 54ac3a0 71946c3 7db8749").split()
RUNS = (["--variant", "torch-ddp", "--devices", "1", "--task", "quick", "--epochs", "20", "--windows", "100"],
        ["--variant", "tf-single", "--devices", "1", "--task", "quick", "--epochs", "5", "--windows", "50"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--commits", default=",".join(COMMITS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--shuffle", type=int, metavar="SEED",
                        help="run the commits in a shuffled order: run in commit order, a machine that grows quieter "
                             "over the hour reads as a commit that made training faster (bench history orders the "
                             "folders by git)")
    parser.add_argument("--duets", help="commits to A/B against the commit before, comma-separated")
    parser.add_argument("--duet-repeats", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / "dtbench-history-cache"
    if not cache.exists() and os.environ.get("DTBENCH_CACHE"):
        shutil.copytree(os.environ["DTBENCH_CACHE"], cache)
    if args.duets:
        return ab(args.out, args.duets.split(","), args.duet_repeats, cache)
    commits = args.commits.split(",")
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(commits)
    for i, commit in enumerate(commits):
        sha = subprocess.run(["git", "rev-parse", commit], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        out = (args.out / f"{i:02d}-{sha[:10]}").resolve()
        if (out / "results.jsonl").exists():
            continue
        part = out.with_name(out.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        with worktree(sha) as tree:
            env = {**os.environ, "PYTHONPATH": str(tree), "DTBENCH_CACHE": str(cache), "CUDA_VISIBLE_DEVICES": ""}
            for r in range(args.repeats):
                for run in (RUNS if r % 2 == 0 else RUNS[::-1]):  # whichever goes first alternates
                    started = time.monotonic()
                    done = subprocess.run([sys.executable, "-m", "bench", "run", *run, "--out", str(part)], cwd=tree,
                                          env=env, capture_output=True, text=True)
                    log.info("%s %s: exit %d in %.0f s", sha[:10], run[1], done.returncode, time.monotonic() - started)
        shutil.rmtree(part / "runs", ignore_errors=True)  # the rows are the history; the run folders are megabytes
        part.rename(out)
    return 0


def ab(out: Path, commits: list[str], repeats: int, cache: Path) -> int:
    """Each commit in duets against its parent, the verdict written into the commit's history folder."""
    os.environ.update({"DTBENCH_CACHE": str(cache), "CUDA_VISIBLE_DEVICES": "", "DTBENCH_PYTHON": sys.executable})
    for commit in commits:
        sha = subprocess.run(["git", "rev-parse", commit], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        [folder] = out.glob(f"*-{sha[:10]}")
        if (folder / "verdict.json").exists():
            continue
        shutil.rmtree(folder / "ab", ignore_errors=True)
        with worktree(f"{sha}^") as parent, worktree(sha) as tree:
            started = time.monotonic()
            # Each side's runs import their own tree's bench: the worker that takes turns is the tree's.
            sides = {"baseline": (str(Path(__file__).parent / "tree_python.sh"), parent),
                     "current": (str(Path(__file__).parent / "tree_python.sh"), tree)}
            duets.duets(sides, list(RUNS), repeats, folder / "ab")
            log.info("%s: %d duets in %.0f s", sha[:10], repeats, time.monotonic() - started)
        for side in ("baseline", "current"):
            shutil.rmtree(folder / "ab" / side / "runs", ignore_errors=True)
        code, text = compare.judge(folder / "ab" / "baseline", folder / "ab" / "current", True, 0.05, 0.01, 0.01,
                                   folder)
        log.info("%s against its parent:\n%s", sha[:10], text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
