"""The rates of repeated planted tunings from run.sh's logs: python rates.py FOLDER."""
import glob, re, sys
from collections import defaultdict
runs = defaultdict(list)
for path in sorted(glob.glob(sys.argv[1] + "/*-*.log")):
    pairing = path.rsplit("/", 1)[1].split("-")[0]
    text = open(path).read()
    lines = [l for l in text.splitlines() if "numpy-planted: best" in l]
    if not lines:
        refused = [l for l in text.splitlines() if l.startswith("error:")]
        runs[pairing].append(("refused", refused[-1] if refused else "no line", ""))
        continue
    best = re.search(r"best (\S+)", lines[0]).group(1)
    tuned = re.search(r"tuned in ([\d.]+) min", text).group(1)
    runs[pairing].append((best, lines[0].strip(), tuned))
for pairing, found in runs.items():
    done = [f for f in found if f[0] != "refused"]
    n = len(done)
    saving = sum(f[0] == "save=0.05" for f in done)
    false = sum(f[0] in ("null=true", "cost=0.05") for f in done)
    cost_found = sum("costs: cost=0.05" in f[1] for f in done)
    print(f"{pairing}: {n} tunings ({len(found) - n} refused by the budget check): saving picked {saving}/{n}, "
          f"missed {n - saving - false}/{n} (defaults kept), false picks {false}/{n} (null or cost), cost found below 1 "
          f"{cost_found}/{n}; minutes used {', '.join(f[2] for f in done)}")
    for f in found:
        print("   ", f[1][:400])
