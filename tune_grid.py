# Idea 1, third grid: full-start leave-one-out thick training, t x passes x prior, seeds 0,1,2.
# -> tune_grid.txt (totals per config over the 3 fold partitions)
import sys, numpy as np
sys.path.insert(0, "/tmp/exp5"); import h5, tune
G = [(t, pa, pr) for t in (1.0, 2.0, 3.0) for pa in (1, 2, 3) for pr in ("trained",)] + [(2.0, 2, "fold"), (2.0, 3, "fold"), (0.5, 3, "trained")]
for name in ("sa", "enron"):
    tot = {}
    for seed in (0, 1, 2):
        D = h5.load(name, seed=seed); L, fo = h5.Lknown(D); base = h5.run(D, h5.sc_base)
        for t, pa, pr in G:
            lo = h5.run(D, tune.sc_tune, t=t, passes=pa, start="full", prior=pr, loo=True)
            r = h5.summ(D, lo, base, L, fo); tag = f"full LOO t={t} passes={pa} prior={pr}"
            print(h5.fmt(f"seed{seed} {name} {tag}", r), flush=True)
            a = tot.setdefault(tag, dict(err=0, fp=0, errbfp=0, nw=0, nr=0, per=[], auc=[]))
            for k in ("err", "fp", "errbfp", "nw", "nr"): a[k] += r[k]
            a["per"].append(f"{r['err']}({r['fp']})"); a["auc"].append(r["auc"])
    for tag, a in tot.items():
        print(f"TOTAL {name} {tag:40s} err {a['err']:3d} fp {a['fp']:3d} err@bFP {a['errbfp']:3d} per-seed {a['per']} "
              f"nauc {np.mean(a['auc']):.5f} newwrong {a['nw']} newright {a['nr']}", flush=True)
