#!/usr/bin/python3
"""`ranksweep ui` in a real browser, against a real coordinator and worker.

Starts ranksweepd (temporary SQLite file, a free loopback port), submits two
small sweeps with the CLI, starts `ranksweep ui` on a free port and drives
headless Chromium through Selenium over every page, asserting on what a
person sees: live progress reaching DONE on an open page (pushed by
Server-Sent Events: the worker starts only after the page is open), the
exact number of rows in the per-seed table, one plot line per head (per head
and recipe for a sweep with an lr axis, whose rows show their lr), a column
that sorts on a click, filters and downloads, two sweeps overlaid on the
compare page, the worker on the workers page, and after a quarantine of that
worker the invalidated rows: out of the plot and the summary, listed (marked
INVALID) only when asked for. Screenshots of every page go to --out.

Exit codes: 0 pass, 1 fail, 77 skip (no Chromium or ChromeDriver installed).
"""
import argparse
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SKIP = 77

# Exhaustive m=2, N=3 (64 sequences): a kernel head at three ranks and
# softmax, three seeds: 3 x 3 + 3 = 12 cells, about a second each on a core.
SWEEP_A = {
    "name": "ui-demo",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
    "ranks": [1, 2, 4],
    "seed_count": 3,
    "train": {"max_steps": 300, "eval_every": 50, "lr": 0.02},
}
CELLS_A = 12
HEADS_A = ["kernel/elu1", "softmax"]
# A second sweep for the compare page, on a dataset with a test split (so
# its page draws a train and a test line): one head, two ranks, two seeds.
SWEEP_B = {
    "name": "ui-compare",
    "dataset": {"kind": "pool", "m": 8, "seq_len": 3, "weight": 3, "pool_size": 40,
                "test_pool_share": 0.25, "train_size": 200, "test_size": 50, "hard_share": 0.5},
    "heads": [{"kind": "kernel", "feature_map": "relu_eps"}],
    "ranks": [1, 4],
    "seed_count": 2,
    "train": {"max_steps": 200, "eval_every": 50, "lr": 0.03},
}
CELLS_B = 4
# A sweep with an lr axis: two recipes (lr 0.02 and 0.005) of a kernel head at
# two ranks, two seeds: 2 x 2 x 2 = 8 cells; its page draws a line per
# (head, recipe) and lists the lr of every row.
SWEEP_C = {
    "name": "ui-recipes",
    "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}],
    "ranks": [1, 2],
    "seed_count": 2,
    "train": {"max_steps": 200, "eval_every": 50, "lr": [0.02, 0.005]},
}
CELLS_C = 8


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Proc:
    """A child process whose stdout lines are collected on a thread."""

    def __init__(self, argv, log_path, env=None):
        self.argv = argv
        self.log = open(log_path + ".stderr", "w")
        self.lines = []
        self.cond = threading.Condition()
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  env=full_env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_for_line(self, pattern, timeout):
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    m = regex.search(line)
                    if m:
                        return m.group(1)
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None and not self.reader.is_alive():
                    raise Failure(f"{self.argv[0]}: no line matching {pattern!r} in {timeout} s; "
                                  f"stdout: {self.lines}")
                self.cond.wait(min(left, 0.5))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        return self.p.returncode


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return chromium, driver


def http_get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True, help="folder for the screenshots")
    args = ap.parse_args()

    chromium, chromedriver = find_browser()
    if chromium is None or chromedriver is None:
        print("SKIP: chromium or chromedriver is not installed (scripts/install-deps installs "
              "them)")
        return SKIP
    # Selenium comes with them from scripts/install-deps: missing is a failure.
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import Select, WebDriverWait

    os.makedirs(args.out, exist_ok=True)
    stale = os.path.join(args.out, "failure.png")
    if os.path.exists(stale):
        os.remove(stale)
    work = tempfile.mkdtemp(prefix="ranksweep-ui-test-")
    bin_dir = args.bin_dir
    procs = []
    driver = None
    try:
        server = Proc([f"{bin_dir}/ranksweepd", "--listen=127.0.0.1:0", f"--db={work}/rs.db",
                       "--insecure_local"], f"{work}/server")
        procs.append(server)
        addr = server.wait_for_line(r"listening on (\S+)", 30)

        def cli(*argv, stdin=None):
            r = subprocess.run([f"{bin_dir}/ranksweep", f"--addr={addr}", *argv], input=stdin,
                               capture_output=True, text=True, timeout=60)
            return r

        # A dashboard that would serve other machines is refused unless asked for.
        r = cli("ui", "--listen", "0.0.0.0:0")
        check(r.returncode == 1, f"ui --listen 0.0.0.0:0 exited {r.returncode}, want 1")
        check("not a loopback address" in r.stderr and "--allow-remote" in r.stderr, r.stderr)

        ids = []
        for spec in (SWEEP_A, SWEEP_B):
            r = cli("submit", "-f", "-", stdin=json.dumps(spec))
            check(r.returncode == 0, f"submit: {r.stderr}")
            ids.append(r.stdout.strip())
        sweep_a, sweep_b = ids

        ui = Proc([f"{bin_dir}/ranksweep", f"--addr={addr}", "ui", "--listen", "127.0.0.1:0"],
                  f"{work}/ui")
        procs.append(ui)
        base = ui.wait_for_line(r"dashboard at (http://\S+/)", 30)

        # Requests naming another host (DNS rebinding) are refused.
        port = base.rstrip("/").rsplit(":", 1)[1]
        status, _, body = http_get(base + "api/sweeps", {"Host": f"attacker.example:{port}"})
        check(status == 403, f"foreign Host: status {status}, want 403: {body}")

        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1360,1500", "--force-device-scale-factor=1"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(chromedriver, log_path=f"{work}/chromedriver.log"),
                                  options=options)
        wait = WebDriverWait(driver, 60)

        def open_page(hash_):
            driver.get(base + hash_)
            wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == "true")
            errors = driver.find_elements(By.ID, "error")
            check(not errors, f"{hash_}: {errors[0].text if errors else ''}")

        def shot(name):
            path = os.path.join(args.out, name)
            check(driver.save_screenshot(path), f"screenshot {path}")

        def texts(selector):
            return [e.text for e in driver.find_elements(By.CSS_SELECTOR, selector)]

        # ---- a sweep, open while nothing has run: progress must come live.
        open_page(f"#/sweep/{sweep_a}")
        progress = driver.find_element(By.ID, "progress")
        check(progress.get_attribute("data-state") == "RUNNING",
              f"state {progress.get_attribute('data-state')}, want RUNNING")
        check(driver.find_element(By.ID, "progress-text").text.startswith(f"0 / {CELLS_A} done"),
              driver.find_element(By.ID, "progress-text").text)
        worker = Proc([f"{bin_dir}/ranksweep-worker", f"--coordinator={addr}", "--device=cpu",
                       "--slots=1"], f"{work}/worker", env={"RANKSWEEP_TORCH_THREADS": "1"})
        procs.append(worker)
        WebDriverWait(driver, 240).until(
            lambda d: d.find_element(By.ID, "progress").get_attribute("data-state") == "DONE")
        progress_text = driver.find_element(By.ID, "progress-text").text
        check(progress_text.startswith(f"{CELLS_A} / {CELLS_A} done") and progress_text.endswith("DONE"),
              f"progress: {progress_text}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#events li")) > 0,
              "no live event message on the page")
        # The stream ends after the last event; the table, summary and plot
        # reload then.
        wait.until(lambda d: d.find_element(By.ID, "status").text == "sweep DONE")
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-loading") == "false")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == CELLS_A,
              f"{len(driver.find_elements(By.CSS_SELECTOR, '#rows tbody tr'))} rows, want {CELLS_A}")
        check(driver.find_element(By.ID, "row-count").text == f"{CELLS_A} of {CELLS_A} rows",
              driver.find_element(By.ID, "row-count").text)
        # One line per head (train only: no test split), one point per seed.
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted(l.get_attribute("data-head") for l in lines) == HEADS_A,
              f"plot lines: {[l.get_attribute('data-head') for l in lines]}")
        check(all(l.get_attribute("data-split") == "train" for l in lines), "a test line without a test split")
        points = driver.find_elements(By.CSS_SELECTOR, "#plot .point")
        check(len(points) == CELLS_A, f"{len(points)} seed points, want {CELLS_A}")
        check(texts("#plot text.xtick") == ["1", "2", "4"], f"x ticks {texts('#plot text.xtick')}")
        # The summary: one row per head; the kernel head's transition is a
        # swept rank or undefined, the softmax head has none.
        summary_rows = driver.find_elements(By.CSS_SELECTOR, "#summary tbody tr")
        check([r.find_element(By.CSS_SELECTOR, "td").text for r in summary_rows] == HEADS_A,
              f"summary heads {[r.text for r in summary_rows]}")
        check(summary_rows[1].find_elements(By.CSS_SELECTOR, "td")[1].text == "no rank", summary_rows[1].text)
        check(summary_rows[0].find_elements(By.CSS_SELECTOR, "td")[1].text in ("1", "2", "4", "–"),
              summary_rows[0].text)
        check(driver.find_element(By.ID, "theory").text == "theory: no bound for this dataset",
              driver.find_element(By.ID, "theory").text)
        check(driver.find_element(By.ID, "no-failures").text == "none", "recent failures not empty")
        shot("sweep.png")

        # Sorting: the seed column ascending, then descending, on clicks.
        seed_col = [c.get_attribute("data-key") for c in
                    driver.find_elements(By.CSS_SELECTOR, "#rows thead th")].index("seed")

        def column(i):
            return [r.find_elements(By.CSS_SELECTOR, "td")[i].text
                    for r in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]

        before = column(seed_col)
        header = driver.find_element(By.CSS_SELECTOR, '#rows th[data-key="seed"]')
        header.click()
        ascending = column(seed_col)
        check(ascending == sorted(before, key=int), f"ascending seeds: {ascending}")
        check(header.get_attribute("aria-sort") == "ascending", header.get_attribute("aria-sort"))
        header.click()
        descending = column(seed_col)
        check(descending == sorted(before, key=int, reverse=True), f"descending seeds: {descending}")
        check(descending != ascending, "the order did not change")

        # Filtering: the softmax head has one row per seed.
        Select(driver.find_element(By.ID, "filter-head")).select_by_value("softmax")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == 3, "softmax rows")
        # A done row, clicked, draws the learning curves of its head and
        # rank: a line per seed (this one highlighted) and their mean.
        driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")[0].click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#curves path.curve-line")) == 3)
        check(len(driver.find_elements(By.CSS_SELECTOR, "#curves path.curve-line.chosen")) == 1,
              "the clicked seed's curve is highlighted")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#curves path.curve-mean")) == 1,
              "one mean curve")
        status, _, body = http_get(f"{base}api/sweeps/{sweep_a}/curves?head=softmax&rank=0")
        check(status == 200, f"curves: {status}")
        curves = json.loads(body)
        check(sorted(c["seed"] for c in curves) == [0, 1, 2], f"curves of seeds {curves}")
        for c in curves:
            check(c["step"] == sorted(c["step"]) and c["step"][0] == 50 and c["test_error"] is None,
                  f"curve {c}")
        status, _, _ = http_get(f"{base}api/sweeps/{sweep_a}/curves?head=softmax")
        check(status == 400, f"curves without a rank: {status}")
        check(driver.find_element(By.ID, "row-count").text == f"3 of {CELLS_A} rows",
              driver.find_element(By.ID, "row-count").text)
        # The downloads carry the filter.
        status, headers, body = http_get(driver.find_element(By.ID, "download-csv").get_attribute("href"))
        check(status == 200, f"CSV download: {status}")
        check(headers.get("Content-Disposition") == f'attachment; filename="{sweep_a}-results.csv"',
              str(headers))
        csv_rows = list(csv.DictReader(io.StringIO(body)))
        check(len(csv_rows) == 3 and {r["head"] for r in csv_rows} == {"softmax"}, body)
        check(all(r["rank"] == "" for r in csv_rows), "softmax rank is not empty in the CSV")
        Select(driver.find_element(By.ID, "filter-head")).select_by_value("")
        status, _, body = http_get(driver.find_element(By.ID, "download-json").get_attribute("href"))
        check(status == 200 and len(json.loads(body)) == CELLS_A, f"JSON download: {status}")
        driver.find_element(By.ID, "filter-text").send_keys("kernel")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")) == 9, "text filter")

        # ---- a sweep with a test split: a train and a test line for its
        # head, a seed point per split, a test error in every row.
        r = cli("watch", sweep_b)
        check(r.returncode == 0, f"watch {sweep_b}: {r.stderr}")
        open_page(f"#/sweep/{sweep_b}")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted((l.get_attribute("data-head"), l.get_attribute("data-split")) for l in lines) ==
              [("kernel/relu_eps", "test"), ("kernel/relu_eps", "train")],
              f"plot lines: {[(l.get_attribute('data-head'), l.get_attribute('data-split')) for l in lines]}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == 2 * CELLS_B, "test-split points")
        test_col = [c.get_attribute("data-key") for c in
                    driver.find_elements(By.CSS_SELECTOR, "#rows thead th")].index("test_error")
        test_errors = [r.find_elements(By.CSS_SELECTOR, "td")[test_col].text
                       for r in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
        check(len(test_errors) == CELLS_B and all(re.fullmatch(r"[0-9.e-]+", t) for t in test_errors),
              f"test errors {test_errors}")
        check("Test transition" in driver.find_element(By.ID, "summary").text, "no test transition column")
        shot("sweep-test-split.png")

        # ---- sweeps: both sweeps, the first one done; tick both and compare.
        open_page("#/sweeps")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#sweeps-table tbody tr")) == 2)
        rows = {r.find_element(By.CSS_SELECTOR, "a.sweep-link").text: r.text
                for r in driver.find_elements(By.CSS_SELECTOR, "#sweeps-table tbody tr")}
        check(set(rows) == {"ui-demo", "ui-compare"}, str(rows))
        check("DONE" in rows["ui-demo"] and f"{CELLS_A} / {CELLS_A}" in rows["ui-demo"], rows["ui-demo"])
        check(f"{CELLS_B} / {CELLS_B}" in rows["ui-compare"], rows["ui-compare"])
        shot("sweeps.png")
        # Found again for each click: the table redraws every 5 s.
        for sweep_id in (sweep_a, sweep_b):
            driver.find_element(By.CSS_SELECTOR, f'#sweeps-table input.pick[data-id="{sweep_id}"]').click()
        driver.find_element(By.ID, "compare-button").click()
        wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == "compare"
                   and d.find_element(By.ID, "main").get_attribute("data-ready") == "true")
        check(not driver.find_elements(By.ID, "error"), "compare page error")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted(l.get_attribute("data-head") for l in lines) ==
              sorted(["ui-demo · kernel/elu1", "ui-demo · softmax", "ui-compare · kernel/relu_eps"]),
              f"compare lines: {[l.get_attribute('data-head') for l in lines]}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == CELLS_A + CELLS_B,
              "compare points")
        shot("compare.png")
        # Test error: only the sweep with a test split has a line.
        Select(driver.find_element(By.ID, "compare-split")).select_by_value("test")
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check([l.get_attribute("data-head") for l in lines] == ["ui-compare · kernel/relu_eps"],
              f"compare test lines: {[l.get_attribute('data-head') for l in lines]}")

        # ---- a sweep with an lr axis: a column of the rows' lr, four rows
        # per lr, one plot line per (head, recipe) labelled with the recipe.
        r = cli("submit", "-f", "-", stdin=json.dumps(SWEEP_C))
        check(r.returncode == 0, f"submit: {r.stderr}")
        sweep_c = r.stdout.strip()
        r = cli("watch", sweep_c)
        check(r.returncode == 0, f"watch {sweep_c}: {r.stderr}")
        open_page(f"#/sweep/{sweep_c}")
        keys = [c.get_attribute("data-key") for c in driver.find_elements(By.CSS_SELECTOR, "#rows thead th")]
        check("axis_lr" in keys and keys.index("axis_lr") == keys.index("seed") + 1, f"columns {keys}")
        check("first_exact_step" in keys, f"no first_exact_step column: {keys}")
        check(driver.find_element(By.CSS_SELECTOR, '#rows th[data-key="axis_lr"]').text == "lr",
              driver.find_element(By.CSS_SELECTOR, '#rows th[data-key="axis_lr"]').text)
        lrs = [r.find_elements(By.CSS_SELECTOR, "td")[keys.index("axis_lr")].text
               for r in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
        check(sorted(lrs) == ["0.005"] * 4 + ["0.02"] * 4, f"lr column {lrs}")
        check(driver.find_element(By.ID, "row-count").text == f"{CELLS_C} of {CELLS_C} rows",
              driver.find_element(By.ID, "row-count").text)
        lines = driver.find_elements(By.CSS_SELECTOR, "#plot path.series-line")
        check(sorted(l.get_attribute("data-head") for l in lines) ==
              ["kernel/elu1 lr=0.005", "kernel/elu1 lr=0.02"],
              f"recipe lines: {[l.get_attribute('data-head') for l in lines]}")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#plot .point")) == CELLS_C, "recipe points")
        # The groups: one per (rank, recipe), named by the recipe.
        recipes = [r.find_elements(By.CSS_SELECTOR, "td")[2].text
                   for r in driver.find_elements(By.CSS_SELECTOR, "#groups tbody tr")]
        check(sorted(recipes) == ["lr=0.005"] * 2 + ["lr=0.02"] * 2, f"group recipes {recipes}")
        shot("sweep-recipes.png")

        # ---- workers: the one worker, with the cells it trained.
        open_page("#/workers")
        rows = driver.find_elements(By.CSS_SELECTOR, "#workers-table tbody tr")
        check(len(rows) == 1, f"{len(rows)} workers, want 1")
        cells = {th.get_attribute("data-key"): td.text for th, td in
                 zip(driver.find_elements(By.CSS_SELECTOR, "#workers-table thead th"),
                     rows[0].find_elements(By.CSS_SELECTOR, "td"))}
        check(cells["device"].startswith("cpu"), str(cells))
        check(cells["slots"] == "1", str(cells))
        check(cells["completed_cells"] == str(CELLS_A + CELLS_B + CELLS_C), str(cells))
        check(cells["alive"] == "alive", str(cells))
        check(cells["standing"] == "good", str(cells))
        check(re.fullmatch(r"\d+ s ago", cells["last_seen"]) is not None, str(cells))
        shot("workers.png")

        # ---- a quarantine of that worker (stopped first, so its cells stay
        # pending): the second sweep's rows leave the plot and the summary;
        # the table lists them, marked INVALID, only when asked to.
        check(worker.stop() == 0, f"worker exited {worker.p.returncode} after SIGTERM")
        r = cli("workers", "quarantine", cells["id"])
        check(r.returncode == 0 and f": {CELLS_A + CELLS_B + CELLS_C} results" in r.stdout,
              f"quarantine: {r.stdout} {r.stderr}")
        # The workers page (still open; it refreshes every 5 s) marks it.
        def standing(d):
            head = d.find_elements(By.CSS_SELECTOR, "#workers-table thead th")
            row = d.find_elements(By.CSS_SELECTOR, "#workers-table tbody tr")[0]
            keys = [th.get_attribute("data-key") for th in head]
            return row.find_elements(By.CSS_SELECTOR, "td")[keys.index("standing")].text
        WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException, IndexError)
                      ).until(lambda d: standing(d) == "quarantined")
        shot("workers-quarantined.png")
        open_page(f"#/sweep/{sweep_b}")
        check(driver.find_element(By.ID, "progress").get_attribute("data-state") == "RUNNING",
              "the sweep is not running again")
        check(not driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr"), "invalid rows listed unasked")
        check(driver.find_element(By.ID, "row-count").text == f"0 of 0 rows ({CELLS_B} invalid not shown)",
              driver.find_element(By.ID, "row-count").text)
        check(not driver.find_elements(By.CSS_SELECTOR, "#plot .point"), "an invalid result is plotted")
        check(driver.find_element(By.ID, "theory").text == "theory: no cell done yet",
              driver.find_element(By.ID, "theory").text)
        group_n = [r.find_elements(By.CSS_SELECTOR, "td")[2].text
                   for r in driver.find_elements(By.CSS_SELECTOR, "#groups tbody tr")]
        check(group_n == ["0/2", "0/2"], f"summary groups n: {group_n}")
        driver.find_element(By.ID, "filter-invalid").click()
        invalid_rows = driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")
        check(len(invalid_rows) == CELLS_B and all(r.get_attribute("class") == "invalid" for r in invalid_rows),
              f"{len(invalid_rows)} invalid rows, want {CELLS_B}")
        keys = [c.get_attribute("data-key") for c in driver.find_elements(By.CSS_SELECTOR, "#rows thead th")]
        for row in invalid_rows:
            tds = row.find_elements(By.CSS_SELECTOR, "td")
            check(tds[keys.index("state")].text == "INVALID", row.text)
            check(tds[keys.index("head")].text == "kernel/relu_eps", row.text)
            check(re.fullmatch(rf"invalidated \S+ by local: quarantine 1 of worker {re.escape(cells['id'])}",
                               tds[keys.index("failure")].text) is not None, row.text)
        check(driver.find_element(By.ID, "row-count").text == f"{CELLS_B} of {CELLS_B} rows ({CELLS_B} invalid)",
              driver.find_element(By.ID, "row-count").text)
        check(not driver.find_elements(By.CSS_SELECTOR, "#plot .point"), "an invalid result is plotted")
        href = driver.find_element(By.ID, "download-csv").get_attribute("href")
        status, _, body = http_get(href)
        csv_rows = list(csv.DictReader(io.StringIO(body)))
        check(status == 200 and [(r["head"], r["state"]) for r in csv_rows] ==
              [("kernel/relu_eps", "INVALID")] * CELLS_B,
              f"CSV download with invalid rows: {status} {body}")
        shot("sweep-invalid.png")
        driver.find_element(By.ID, "filter-invalid").click()
        status, _, body = http_get(driver.find_element(By.ID, "download-csv").get_attribute("href"))
        check(status == 200 and not list(csv.DictReader(io.StringIO(body))),
              f"CSV download without invalid rows: {body}")
        open_page("#/workers")  # leave the live page

        # The pages ran without a script error or a blocked resource.
        severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        check(not severe, f"browser console errors: {severe}")

        # Ctrl-C (SIGINT) stops the dashboard cleanly.
        ui.p.send_signal(signal.SIGINT)
        check(ui.p.wait(20) == 0, f"ui exited {ui.p.returncode} after SIGINT")
        print(f"PASS; screenshots in {args.out}")
        return 0
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        for name in ("server", "worker", "ui"):
            path = f"{work}/{name}.stderr"
            if os.path.exists(path):
                with open(path) as f:
                    print(f"--- {name} stderr (last 2000 chars)\n{f.read()[-2000:]}", file=sys.stderr)
        if driver is not None:
            try:
                driver.save_screenshot(os.path.join(args.out, "failure.png"))
            except Exception:  # the failure above matters more
                pass
        return 1
    finally:
        if driver is not None:
            driver.quit()
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
