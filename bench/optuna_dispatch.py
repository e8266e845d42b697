#!/usr/bin/env python3
"""The peer of dispatch_bench: Optuna with SQLite storage running no-op
trials from several processes, the way a researcher would shard a sweep
without a coordinator. Prints one line: trials, seconds, trials_per_second."""
import argparse
import multiprocessing as mp
import os
import tempfile
import time

import optuna


def run(storage, trials):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="bench", storage=storage)
    study.optimize(lambda t: t.suggest_int("rank", 1, 256) * 0.0, n_trials=trials)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--procs", type=int, default=8)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        storage = "sqlite:///" + os.path.join(d, "optuna.db")
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        optuna.create_study(study_name="bench", storage=storage)
        per = a.trials // a.procs
        t0 = time.perf_counter()
        ps = [mp.Process(target=run, args=(storage, per)) for _ in range(a.procs)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
        secs = time.perf_counter() - t0
        done = len(optuna.load_study(study_name="bench", storage=storage).trials)
        print(f"optuna procs={a.procs} trials={done} seconds={secs:.3f} "
              f"trials_per_second={done / secs:.1f}")


if __name__ == "__main__":
    main()
