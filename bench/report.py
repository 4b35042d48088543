"""Render docs/benchmarks.md from the benchmark JSON files (python -m bench report).

Every number in the document comes from docs/bench/*.json (or, for the GPU history, from the
shipped assets/mnist-default card and metrics.jsonl); the prose around them is chosen by what
the numbers say (met / missed), so re-running the benchmarks and this command keeps it true.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

from .gpu import TARGET_ACCURACY as GPU_TARGET_ACC, TARGET_SECONDS as GPU_TARGET_S, history_summary

FILES = ("throughput", "time_to_accuracy", "early_exit", "latency", "profile", "gpu")
SHARED_SHARE = 0.10           # other processes used more than this share of the CPU: say the machine was shared


# ----------------------------------------------------------------------------- formatting

def f(v, digits: int = 2, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}{unit}"
    if abs(v) >= 1000:
        return f"{v:,.0f}{unit}"
    return f"{v:.{digits}f}{unit}"


def ok(met: Optional[bool]) -> str:
    return "–" if met is None else ("**met**" if met else "**missed**")


def table(headers, rows) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def load(results_dir: Path) -> dict:
    docs = {}
    for name in FILES:
        p = Path(results_dir) / f"{name}.json"
        if p.exists():
            docs[name] = json.loads(p.read_text())
    return docs


# ----------------------------------------------------------------------------- sections

def machine_section(docs: dict) -> str:
    rows, shared = [], False
    for name, d in docs.items():
        m = d["machine"]
        share = m.get("other_work_cpu_share")
        shared |= share is not None and share > SHARED_SHARE
        dev = m.get("gpu") or m.get("device_name") or m.get("device")
        rows.append([name + (" (quick)" if d.get("quick") else ""), m.get("date", "–"), dev,
                     f"{m.get('cpu_count')} / {m.get('torch_threads')}",
                     " ".join(f"{v:.2f}" for v in (m.get("loadavg_start") or [])) or "–",
                     " ".join(f"{v:.2f}" for v in (m.get("loadavg_end") or [])) or "–",
                     "–" if share is None else f"{share:.0%}", f"`{m.get('command', '')}`"])
    any_m = next(iter(docs.values()))["machine"] if docs else {}
    text = [f"CPU: {any_m.get('cpu', '?')}; torch {any_m.get('torch', '?')}, Python {any_m.get('python', '?')}, "
            f"{any_m.get('platform', '?')}; code at commit `{any_m.get('git_commit', '?')}`.", "",
            table(["benchmark", "date", "device", "cores / torch threads", "load avg at start (1, 5, 15 min)",
                   "at end", "CPU used by other work", "command"], rows), "",
            "\"CPU used by other work\" is the share of the machine's CPU time, during the benchmark, that "
            "went to processes other than the benchmark (from /proc/stat and the benchmark's own CPU time). "
            "Load averages include the benchmark's own work."]
    if shared:
        text += ["", "**The machine was shared with other work during some of these runs** (other people's "
                 "tests and training on the same 2 cores), so absolute times are noisy. Ratios were measured "
                 "side by side in one process, and repeated rounds keep each variant's fastest."]
    return "\n".join(text)


def summary_section(docs: dict, hist: Optional[dict]) -> str:
    rows = []
    tp = docs.get("throughput", {}).get("results")
    if tp:
        r = tp["ratios"]
        rows.append(["1", "(c) project design at the reference's sizes vs (b) article-style reference: train images/s",
                     f"{f(r['c_over_b'], 1)}×", f"≥ {f(r['target_c_over_b'], 0)}×", ok(r["met_c_over_b"])])
        rows.append(["1", "(a) project default vs (d) its CNN as a plain classifier: time per image",
                     f"{f(r['a_time_over_d'])}×", f"≤ {f(r['target_a_time_over_d'], 1)}×", ok(r["met_a_time_over_d"])])
        if "r_matmul_share" in r:
            rows.append(["1", "(r) explorer default design (rows reader): training step's GFLOP/s over a large "
                              "matmul's on the same cores", f"{100 * r['r_matmul_share']:.0f}%",
                         f"≥ {100 * r['target_r_matmul_share']:.0f}%", ok(r["met_r_matmul_share"])])
            rows.append(["1", "(r) explorer default design vs (b) article-style reference: train images/s",
                         f"{f(r['r_over_b'], 1)}×", f"≥ {f(r['target_r_over_b'], 0)}×", ok(r["met_r_over_b"])])
    ta = docs.get("time_to_accuracy", {}).get("results")
    if ta:
        rows.append(["2", f"Training time to ≥ {ta['target_accuracy']:.1%} MNIST test accuracy, explorer quick-run "
                          "settings, CPU",
                     f"{f(ta['seconds_to_target'], 1)} s" if ta["reached"] else f"not reached (final {f(ta['final_accuracy'], 4)})",
                     f"≤ {f(ta['target_seconds'], 0)} s", ok(ta["met"])])
    ee = docs.get("early_exit", {}).get("results")
    if ee:
        prim = ee["by_batch"][0]
        for name, m in prim["models"].items():
            s = m["modes"].get("sample") or next(iter(m["modes"].values()))
            rows.append(["3", f"Early exit, recurrent part (whole inference), `{name}`, {m.get('design', 'cnn reader')} "
                              f"(mean {f(s['mean_steps'])} steps, sample mode, "
                              f"{prim['batch_size']:,} images per call)",
                         f"{f(s['rec_speedup'])}× (ideal {f(s['ideal_speedup'])}×; whole {f(s['whole_speedup'])}×)",
                         f"≥ {f(s['target_speedup'])}×", ok(s["met"])])
    la = docs.get("latency", {}).get("results")
    if la:
        rows.append(["4", "Explorer latency, 280×280 canvas → per-step figures, p95 (p50)",
                     f"{f(la['p95_ms'], 1)} ms ({f(la['p50_ms'], 1)} ms)", f"≤ {f(la['target_p95_ms'], 0)} ms", ok(la["met"])])
    gp = gpu_doc(docs)
    if gp:
        t = gp["results"]["time_to_accuracy"]
        rows.append(["5", f"GPU ({gp['machine'].get('gpu')}): time to ≥ {t['target_accuracy']:.1%} test accuracy",
                     f"{f(t['seconds_to_target'], 1)} s" if t["reached"] else "not reached",
                     f"≤ {f(t['target_seconds'], 0)} s", ok(t["met"])])
        sbs = gp["results"].get("side_by_side")
        if sbs and sbs.get("speedup_128") is not None:
            rows.append(["5", "GPU: graph / eager step, train images/s at N = 20, batch 128", f"{f(sbs['speedup_128'])}×",
                         "—", "—"])
        par = gp["results"].get("parity")
        if par and "15" in par["graph_ms_per_step"]:
            rows.append(["5", f"GPU: parity n = 15, batch {par['batch_size']}, ms per step (graph step)",
                         f(par["graph_ms_per_step"]["15"]), f"≤ {f(par['target_ms_n15'], 0)}", ok(par["met_n15"])])
    else:
        first = (hist or {}).get("first_val_at_target")
        rows.append(["5", f"GPU: time to ≥ {GPU_TARGET_ACC:.1%} test accuracy", "not measured here (no GPU in this "
                     "session); the shipped model's training history: first epoch-end *validation* ≥ "
                     f"{GPU_TARGET_ACC:.0%} at {f(first['elapsed'], 1)} s" if first else "not measured (no GPU)",
                     f"≤ {f(GPU_TARGET_S, 0)} s", "not measured"])
    return table(["#", "benchmark", "measured", "target", "result"], rows)


def throughput_section(d: dict) -> str:
    r, c = d["results"], d["config"]
    v, ratio = r["variants"], r["ratios"]
    rows = [[x["label"], x.get("design", "—"), f(x["params"]), f(x["ms_per_step"], 1), f(x["images_per_s"], 0),
             f(x["us_per_image"], 0), f(x.get("gflop_per_step")), f(x.get("gflops"), 0),
             f"{100 * x['matmul_share']:.0f}%" if "matmul_share" in x else "—"] for x in v.values()]
    text = [f"N = {c['max_steps']}, batch {c['batch_size']}; each variant ran {c['warm']} untimed steps, then "
            f"{c['steps']} timed steps ((b): {c.get('reference_steps') or c['steps']}), in {c['rounds']} round(s) "
            "side by side in one process; each variant keeps its fastest round.", "",
            table(["variant", "design", "parameters", "ms / step", "train images / s", "µs / image", "GFLOP / step",
                   "GFLOP/s", "of matmul"], rows), ""]
    if "matmul_gflops" in ratio:
        text += [f"GFLOP per step: the matmuls and convolutions of one update (forward, loss, backward), counted by "
                 "`torch.utils.flop_counter` (`bench/flops.py`); element-wise work is not counted. *Of matmul*: the "
                 f"achieved GFLOP/s over a [{ratio['matmul_n']}]² float32 matmul's on the same cores and threads, "
                 f"measured in each round of the same run (best: {f(ratio['matmul_gflops'], 0)} GFLOP/s).", "",
                 f"- (r), the explorer default's design: **{100 * ratio['r_matmul_share']:.0f}%** of the matmul's rate "
                 f"(target ≥ {100 * ratio['target_r_matmul_share']:.0f}%: {ok(ratio['met_r_matmul_share'])}); "
                 f"(r) / (b) = **{f(ratio['r_over_b'], 1)}×** the images per second (target ≥ "
                 f"{f(ratio['target_r_over_b'], 0)}×: {ok(ratio['met_r_over_b'])})."]
    text += [
            f"- (c) / (b) = **{f(ratio['c_over_b'], 1)}×** (target ≥ {f(ratio['target_c_over_b'], 0)}×: "
            f"{ok(ratio['met_c_over_b'])}); (a) / (b) = {f(ratio['a_over_b'], 1)}×.",
            f"- (a)'s time per image / (d)'s = **{f(ratio['a_time_over_d'])}×** (target ≤ "
            f"{f(ratio['target_a_time_over_d'], 1)}×: {ok(ratio['met_a_time_over_d'])})."]
    if "a_over_a0" in ratio:
        text.append(f"- (a) / (a0) = {f(ratio['a_over_a0'])}×: what this work's changes to `ponder/tasks/mnist/readers.py` and "
                    "`ponder/halting.py` bought on the default model (same weights, same loop; see *Profile*).")
    if "e_over_a" in ratio:
        text.append(f"- torch.compile: (e) / (a) = {f(ratio['e_over_a'])}× on this CPU, after a compilation that "
                    "takes about a minute, so it stays off by default (`TrainConfig.compile`).")
    text += ["", "What the variants are: (a) `TrainConfig()`'s model (the cnn reader) trained by "
             "`ponder.training.loop.train`; (r) the design of the explorer's default model `mnist-adaptive` (the row "
             "reader, its card's model and training settings: λp 0.5, β 0.02) trained by the same loop; (b) "
             "`bench/reference.py`, the article's design in a plain loop (no PyTorch Lightning overhead charged): "
             "conv 10→20, Dropout2d, a 64-d embedding and an MLP cell, the CNN re-run at every one of the N + 1 "
             "cell applications, a `DataLoader` over torchvision's MNIST with per-image PIL → ToTensor → Normalize; "
             "(c) the project's model (CNN once, GRU cell, MNIST as one uint8 tensor batched on the device) at (b)'s "
             "sizes: conv 10→20, embedding 64, hidden 64; (d) (a)'s CNN with a linear head, a PonderNet with N = 1 "
             "(p₁ = 1, plain cross-entropy) trained by the same loop as (a)."]
    if not ratio["met_c_over_b"]:
        text += ["", f"**Why (c)/(b) misses {f(ratio['target_c_over_b'], 0)}×:** (b) is not slow per operation: its CNN is "
                 "tiny, so re-running it N + 1 times costs less than the factor N + 1 suggests, and (c) still pays N "
                 "sequential recurrent steps forward and backward, each a handful of small operators whose fixed "
                 f"dispatch cost dominates at batch {c['batch_size']} on this CPU. What would close it: fewer operators per step "
                 "(a fused GRU-step kernel, or a compiler that fuses the step, see (e)), or a larger batch."]
    if not ratio["met_a_time_over_d"]:
        text += ["", f"**Why (a)/(d) misses {f(ratio['target_a_time_over_d'], 1)}×:** the pondering overhead is N = 20 "
                 "sequential GRU steps forward and backward (about 7 small operators each way per step, each costing "
                 "a fixed ~10–20 µs of dispatch on this CPU), the halting distribution and the per-step losses; the "
                 "CNN, which (d) also pays, is already as fast as channels-last oneDNN makes it. What would close it: "
                 "fusing the step (a hand-written GRU-step kernel, or torch.compile where compilation pays off, see "
                 "(e)), or a larger batch, which amortises the per-operator cost. (The training loop already uses "
                 "the fused Adam, one optimiser kernel for all parameters.)"]
    return "\n".join(text)


def time_to_accuracy_section(d: dict) -> str:
    r = d["results"]
    tc = r["train_config"]
    pts = r["curve"]
    rows = [[p["step"], f(p["train_seconds"], 1), f(p["test_accuracy"], 4) + (" (final)" if p.get("final") else "")]
            for p in pts]
    text = [f"Settings (the explorer's Train form untouched): λp {tc['lambda_p']}, β {tc['beta']}, N {tc['max_steps']}, "
            f"hidden {tc['hidden']}, batch {tc['batch_size']}, lr {tc['lr']}, {tc['epochs']:g} epochs, "
            f"{tc['lr_schedule']} schedule, time budget {f(tc['max_seconds'], 0)} s, seed {tc['seed']}, "
            f"device {tc['device']}, {d['machine'].get('torch_threads')} threads.", ""]
    if r["reached"]:
        text.append(f"**{f(r['seconds_to_target'], 1)} s** of training to reach {r['target_accuracy']:.1%} test "
                    f"accuracy (step {r['step_at_target']}, {f(r['accuracy_at_target'], 4)}; target ≤ "
                    f"{f(r['target_seconds'], 0)} s: {ok(r['met'])}); it "
                    + ("stayed at or above the target at every later snapshot." if r["stays_above_after"]
                       else "dipped below the target again at a later snapshot."))
    else:
        text.append(f"The run did **not** reach {r['target_accuracy']:.1%} (final {f(r['final_accuracy'], 4)}).")
    text += [f"The whole run: {r['steps']} steps in {f(r['train_seconds'], 1)} s ({r['status']}"
             + (f", {r['reason']}" if r["reason"] else "") + f"), {f(r['images_per_second'], 0)} train images/s "
             f"including its epoch-end validation passes; final test accuracy {f(r['final_accuracy'], 4)}, mean "
             f"halting step {f(r['final_mean_steps'])}.", "",
             "How evaluation is kept out of the time: the train callback only copies the weights (every "
             f"{f(d['config']['snapshot_every'], 1)} s of training; the copies took {f(1000 * r['snapshot_overhead_seconds'], 0)} ms "
             "in all and are subtracted); each copy is evaluated on the "
             f"{r['eval_images']:,} test images after training (mode 'sample', seed 0, as run cards report; "
             f"{f(r['eval_seconds'], 1)} s, not counted). The time is therefore an upper bound with a resolution of "
             "one snapshot interval. The loop's own epoch-end validation passes are counted (every real run has "
             "them); loading MNIST is not.", "",
             table(["step", "training seconds", "test accuracy"], rows)]
    if not r["met"]:
        text += ["", "**Missed.** What would close it: the per-step cost (see *Training throughput* and *Profile*), "
                 "or fewer steps to the target (a higher learning rate early on)."]
    return "\n".join(text)


def early_exit_section(d: dict) -> str:
    r = d["results"]
    text = ["`ponder(model, x, mode)` with per-sample early exit (halted samples leave the batch) against "
            "`ponder(model, x, 'expected')`, the full N = 20-step unroll. *Recurrent* times start from precomputed "
            "CNN embeddings (the same `ponder()` on a step function whose `encode` returns its input); *whole* "
            "times start from images. Ideal = N / mean steps; target = "
            f"{r['target_fraction']} × ideal, on the recurrent part. Best of {d['config']['repeats']} interleaved "
            "repeats" + (", timed by the process's CPU time (one torch thread; waits for a core the machine's other "
                         "work held drop out)" if d["config"].get("clock") == "cpu" else "") + "."]
    synth = [n for bb in r["by_batch"] for n, m in bb["models"].items() if m.get("synthetic")]
    if synth:
        shipped = [(next(iter(m["modes"].values()))["mean_steps"], n) for n, m in r["by_batch"][0]["models"].items()
                   if not m.get("synthetic") and m.get("design", "cnn reader").endswith("reader")]
        slowest = f" (the slowest shipped MNIST model, `{max(shipped)[1]}`, takes {f(max(shipped)[0])} steps on average)" \
            if shipped else ""
        text.append(f"A timing stand-in{slowest}: `{synth[0]}` is mnist-default (cnn reader) with its λ-head bias "
                    "lowered until the mean sampled halting step is about 10: the same network and cost per step, "
                    "only the halting moves (its accuracy is not the point).")
    for bb in r["by_batch"]:
        rows = []
        for name, m in bb["models"].items():
            for mode, s in m["modes"].items():
                rows.append([f"`{name}`", m.get("design", "cnn reader"), mode, f(s["mean_steps"]), f(s["accuracy"], 4),
                             f(m["full_images_per_s"], 0),
                             f(s["early_images_per_s"], 0), f"{f(s['whole_speedup'])}×", f"**{f(s['rec_speedup'])}×**",
                             f"{f(s['ideal_speedup'])}×", f"{f(s['target_speedup'])}×", ok(s["met"])])
        primary = bb["batch_size"] == r["primary_batch_size"]
        text += ["", f"**{bb['batch_size']:,} image{'s' if bb['batch_size'] > 1 else ''} per call** "
                 f"({bb['images']:,} test images{'; the target is judged here' if primary else ''}):", "",
                 table(["model", "design", "mode", "mean steps", "accuracy", "full: images/s", "early: images/s",
                        "whole speed-up",
                        "recurrent speed-up", "ideal", "target", "result"], rows)]
    prim = r["by_batch"][0]
    shares = [m["rec_full_seconds"] / m["full_seconds"] for m in prim["models"].values()
              if m["full_seconds"] and m.get("design", "cnn reader") == "cnn reader"]
    if shares:
        span = f"{min(shares):.0%}" + ("" if f"{min(shares):.0%}" == f"{max(shares):.0%}" else f"–{max(shares):.0%}")
        text += ["", f"Where inference time goes: for the cnn reader the N-step recurrent part is only "
                 f"{span} of a full-unroll inference at {prim['batch_size']:,} images per "
                 "call; the CNN embedding is the rest, and as every step reads all of it, it is computed once per "
                 f"image either way, so early exit speeds the whole inference up by at most 1 / (1 − {max(shares):.2f}) "
                 f"= {1 / (1 - max(shares)):.2f}×: the *whole* column. (Parity's encoding is one small projection: "
                 "there the recurrent part is nearly all.) The rows reader's step n reads only its first 2n image rows: from 1,000 inputs per call "
                 "early exit builds that encoding one level a step, for the inputs still running "
                 "(`ponder.tasks.mnist.levels`), so an input that halts at step 3 never has its other rows encoded; "
                 "its whole speed-up is bounded by L / E[min(halting step, L)] on the encoding (L = 14 levels), not "
                 "by the bound above."]
    missed = [(n, mode, s) for n, m in prim["models"].items() for mode, s in m["modes"].items() if not s["met"]]
    if missed:
        names = ", ".join(f"`{n}` ({mode})" for n, mode, _ in missed)
        text += ["", f"**Missed at {prim['batch_size']:,} per call: {names}.** The loop's fixed cost per step "
                 "weighs most where the ideal speed-up is large: the tail of the halting "
                 "distribution keeps a few samples running for many steps after most have stopped, and each of those "
                 "steps costs the same operator calls however few samples remain (below). What would close it: fewer "
                 "operator calls per early-exit step (a fused step), or evaluating in larger batches."]
    small = [bb for bb in r["by_batch"] if bb["batch_size"] != r["primary_batch_size"]]
    if small:
        text += ["", "Smaller batches: every step of the early-exit loop pays a fixed number of operator calls whatever "
                 "the batch: the step function's state update and its λ head only (`stepper()`: a GRU reader's gates "
                 "are split once a call, and the answer head runs once at the end, on the states the inputs halted "
                 "at), the halting test and one host read. For the MNIST readers that is 12 calls a step in sample "
                 "mode and 16 in deterministic mode, against 7 a step in the batched full unroll plus about 40 once "
                 "for its heads, halting distribution and answer mixture (parity's GRU cell is itself 16 calls a step "
                 "either way). A step at which some inputs halt also records their states and compacts the rest "
                 "(about 12 calls); at one input per call nothing is ever gathered or scattered. Sampled halting has "
                 "a long tail (a few samples of a batch run to step N), so at 1,000 images per call the loop runs "
                 "nearly N iterations whatever the mean."]
        rows = [(s["whole_speedup"], n, mode, bb["batch_size"]) for bb in small for n, m in bb["models"].items()
                for mode, s in m["modes"].items()]
        slower = sorted(row for row in rows if row[0] < 1)
        if slower:
            text += ["", "Slower than the full unroll at these sizes (whole speed-up below 1×): " + ", ".join(
                f"`{n}` ({mode}) at {bs:,} per call, {f(v)}×" for v, n, mode, bs in slower) + "."]
        elif rows:
            v, n, mode, bs = min(rows)
            text += ["", f"At every batch size measured, early exit is at least as fast as the full unroll for every "
                     f"model and mode (the lowest whole speed-up: {f(v)}×, `{n}` ({mode}) at {bs:,} per call)."]
        text += ["", "Building the rows reader's encoding one level a step costs two convolution calls a level (~130 "
                 "µs each on one thread, whatever the batch), so below 1,000 inputs per call its encoding is computed "
                 "in one pass, as for the other designs, and early exit reads it in place while every input runs."]
    return "\n".join(text)


def latency_section(d: dict) -> str:
    r = d["results"]
    rows = [[k, f(s["p50_ms"], 1), f(s["p95_ms"], 1), f(s["mean_ms"], 1), f(s["max_ms"], 1)]
            for k, s in r["stages"].items()]
    cold = r["cold_ms"]
    text = [f"{r['inputs']} inputs ({r['input_source']}, each scaled, moved and upscaled to a 280×280 RGBA canvas, half "
            "of them rotated), the model `" + d["config"]["model"] + "`, mode " + d["config"]["mode"] + ", one seed per input. "
            "Stages are the explorer's own functions in the order the digit page calls them; *total* = preprocess + "
            f"input + ponder + the {r['figures']} figures; *to_json* (what `st.plotly_chart` sends to the browser) is "
            "listed apart and included in *total_with_json*.", "",
            table(["stage", "p50 ms", "p95 ms", "mean ms", "max ms"], rows), "",
            f"p95 **{f(r['p95_ms'], 1)} ms** (target ≤ {f(r['target_p95_ms'], 0)} ms: {ok(r['met'])}). The first call "
            f"of a process takes {f(cold['total'], 0)} ms (plotly's lazy imports and templates); the page pays it once."]
    tot = r["stages"]["total"]["p50_ms"]
    figs = r["stages"]["figures"]["p50_ms"]
    if tot:
        text += ["", f"Figure building is {figs / tot:.0%} of the median total; the model (full unroll plus early-exit "
                 f"`ponder()` on one image) is {f(r['stages']['ponder']['p50_ms'], 1)} ms. The figures draw their "
                 "reference lines as plain layout shapes with legend labels: plotly's `add_vline` / `add_hline`, used "
                 "before, were most of the figure-building time under cProfile."]
    po = r["stages"]["ponder"]
    if po["p50_ms"] and po["p95_ms"] > 3 * po["p50_ms"]:
        share = d["machine"].get("other_work_cpu_share")
        text += ["", f"The ponder stage does the same work for every input, yet its p95 ({f(po['p95_ms'], 1)} ms) is "
                 f"{po['p95_ms'] / po['p50_ms']:.0f}× its median ({f(po['p50_ms'], 1)} ms, max {f(po['max_ms'], 0)} ms): "
                 "that tail is waiting for the CPU"
                 + (f" (other work used {share:.0%} of the machine during this benchmark)" if share else "") + "."]
    if not r["met"]:
        text += ["", f"**Missed.** Figure building alone has a p95 of {f(r['stages']['figures']['p95_ms'], 1)} ms; what "
                 "would close the gap is fewer or lighter figures per input (the explorer draws its labelled rules as plain "
                 "layout shapes already), and a machine not shared with other work for the tail."]
    return "\n".join(text)


def profile_section(d: dict, tp: Optional[dict]) -> str:
    r = d["results"]
    a, dd = r["phases"]["a_default"], r["phases"]["d_classifier"]
    names = [k for k in a if k != "total"]
    rows = [[k, f(a[k]), f(dd[k]), f"{100 * a[k] / a['total']:.0f}%"] for k in names]
    rows.append(["**total**", f"**{f(a['total'])}**", f"**{f(dd['total'])}**", "100%"])
    ops = [[f"`{o['op']}`", f(o["calls_per_step"], 0), f(o["self_ms_per_step"]), f"{o['self_percent']:.1f}%"] for o in r["ops"]]
    over = a["total"] - dd["total"]
    lay = r.get("layout") or {}
    text = [f"One training step of (a) and (d), batch {d['config']['batch_size']}, written out with a clock between "
            f"the parts of `ponder/training/loop.py`'s step ({d['config']['steps']} steps after {d['config']['warm']} untimed):", "",
            table(["phase", "(a) ms / step", "(d) ms / step", "share of (a)"], rows), "",
            f"The pondering overhead, (a) − (d) = {f(over)} ms per step: the {d['config']['max_steps']} recurrent steps "
            f"forward {f(a['recurrent_fwd'] - dd['recurrent_fwd'])} ms, their backward {f(a['backward'] - dd['backward'])} ms, "
            f"halting + losses {f(a['loss_fwd'] - dd['loss_fwd'])} ms, Adam / clipping / the safety copy on the extra "
            f"parameters {f(a['adam'] + a['clip'] + a['safety'] - dd['adam'] - dd['clip'] - dd['safety'])} ms. "
            f"The backward pass is {100 * a['backward'] / a['total']:.0f}% of (a)'s step.", "",
            f"Top operators by self CPU time (torch.profiler over {d['config']['profiled_steps']} steps of the real "
            "`ponder.training.loop.train` loop):", "", table(["operator", "calls / step", "self ms / step", "share"], ops), ""]
    text += ["What the profile showed, and what was changed (`ponder/tasks/mnist/readers.py`, `ponder/halting.py`):", "",
             "1. **max-pool on NCHW tensors is slow on CPU.** Before, `aten::max_pool2d_with_indices` was among the "
             "top operators, costlier than both convolutions' forward passes. oneDNN's channels-last kernels are faster"
             + (f" (max-pool forward + backward on [{d['config']['batch_size']}, 16, 28, 28]: NCHW {f(lay['nchw_ms'])} ms, "
                f"channels-last {f(lay['channels_last_ms'])} ms, {f(lay['speedup'], 1)}×)" if lay else "")
             + ", so `MnistStep` feeds its CNN channels-last activations on CPU, and applies ReLU after the pool "
             "(the same values, on 4× fewer elements).",
             "2. **The GRU re-projected the same embedding at every step.** `nn.GRUCell(e, h)` computes W_ih·e + b_ih "
             "each step though e never changes. `encode()` now returns that projection once (ctx [B, 3H], the r/z "
             "hidden biases folded in); a step only multiplies h (same parameters, checkpoints load unchanged).",
             "3. **Fewer, fused operators per step.** The gates use `addmm` with the projection as its bias, `addcmul` "
             "and `lerp` (h' = lerp(n, h, z)); the projection is split once per unroll, not per step; and "
             "`PonderNet.forward` calls an optional `unroll()`, which runs the N cell updates and then applies the "
             "output and λ heads once to the stacked states instead of 2 × N times.",
             "4. **Early-exit inference (`ponder()`)** runs the step split in two (the step function's `stepper()`: "
             "the state update and the λ head each step; the answer head and the class probabilities once at the "
             "end, on the states the inputs halted at), does only what its mode needs per step (no log-survival in "
             "sample mode), and gathers nothing while every input still runs (at one input per call, never)."]
    if tp and "a_over_a0" in tp["results"]["ratios"]:
        v = tp["results"]["variants"]
        text += ["", f"Measured effect on the default model's training step (*Training throughput*, same run): "
                 f"{f(v['a0_before']['ms_per_step'], 1)} ms before → {f(v['a_default']['ms_per_step'], 1)} ms after, "
                 f"{f(tp['results']['ratios']['a_over_a0'])}× the images per second."]
    text += ["", "Checked and left alone: the batch pipeline (`MnistBatches`) already keeps MNIST as one uint8 tensor "
             "on the device and normalises / rotates whole batches there, with no DataLoader (the *batch* phase "
             "above). Intra-op threads: the cores the load average leaves free (`common.set_threads`, as the CLI's "
             "training; each result's machine record has the number). Side tests "
             "during development (not re-measured by `bench`): the recurrent part ran no faster on 1 thread. The "
             "training loop uses `torch.optim.Adam(..., fused=True)`: on the default model's 252,043 parameters the "
             "optimiser step took 0.55 ms with the default (foreach) Adam and 0.16 ms fused (300 steps each, 2 threads)."]
    text += ["", unroll_text(r.get("unroll"), d["config"])]
    return "\n".join(text)


def unroll_text(u: Optional[dict], c: dict) -> str:
    """What the hand-written GRU backward buys, and what else was tried for a faster training step."""
    text = ["**The GRU updates by hand.** On CPU, a training unroll runs its N GRU updates as one autograd node "
            "(`ponder/tasks/mnist/gru.py`): 6 operators a step forward into preallocated buffers, 9 a step backward "
            "(the gates' gradients written into one buffer with `addcmul`, `tanh_backward`, `sigmoid_backward`, then "
            "one GEMM), the weight gradient one GEMM over all steps, every per-step view made before the loops. "
            "Autograd recorded 7 nodes a step and ran about 25 small operators a step backward: a training forward of "
            "the cnn reader had 211 autograd nodes at N = 20 and 106 at N = 5, now 66 at both "
            "(`tests/ponder/training/test_step.py`, which also checks the update's loss and gradients against "
            "nn.GRUCell run step by step)."]
    if u and "updates_speedup" in u:
        text += ["", f"This run, batch {c['batch_size']}, the two ways alternating (`bench/profiling.py`, by_hand_check; "
                 "best of each):", "", table(["what", "autograd step by step, ms", "by hand, ms", "speed-up"], [
                     [w, f(u[f"{k}_autograd_ms"]), f(u[f"{k}_by_hand_ms"]), f"{f(u[f'{k}_speedup'])}×"]
                     for k, w in (("updates", f"the {c['max_steps']} GRU updates, forward + backward"),
                                  ("cnn_step", "a training update, cnn reader (TrainConfig())"),
                                  ("rows_step", "a training update, row reader (the explorer default's design)"))])]
    text += ["", "Tried for a faster step during development, on the 2 cores with other work on them (load average 4–7, "
             "so 1 torch thread and the process's CPU time, interleaved, best of each; not re-measured by `bench`):", "",
             "- *The hand-written GRU backward, whole step* (batch 128): the row reader 54.3 → 53.9 ms, the cnn "
             "reader 64.8 → 63.8 ms per step (100 steps each, alternating); by_hand_check twice: the row reader "
             "68.9 → 66.2 and 58.0 → 56.4 ms, the cnn reader 72.3 → 61.0 and 59.2 → 58.9 ms, the 20 updates alone "
             "13.3 → 12.7 and 11.9 → 10.7 ms. At batch 32 (`python -m bench profile --quick`) it paid more, 1.20× "
             "(cnn) and 1.54× (rows) a step, 1.24× the updates: the per-operator cost is a larger share there. "
             "At batch 128 most of the recurrence's time is its 40 small GEMMs ([128, 64] × "
             "[64, 192]: 42 µs each, 37 GFLOP/s on one core), which no fusion removes, and the recurrence is only "
             "about a tenth of the step.",
             "- *The first convolution* (1 → 16 channels, 5 × 5, on [128, 1, 28, 28]; forward + backward): "
             "channels-last oneDNN 9.4 ms (kept), NCHW 21.2 ms, oneDNN off 32.6 ms, unfold + matmul (with the pool) "
             "50.5 ms; its weight gradient alone: oneDNN 3.0 ms, as a convolution with the batch as channels 8.4 ms, "
             "unfold + einsum 25.9 ms.",
             "- *`aten::fill_`*: its largest call is max-pool's backward zero-filling the first convolution's "
             "gradient ([128, 16, 28, 28], 6.4 MB) before scattering into it; the rest are small (F.pad's border, the "
             "loss's zero row). An amax-based pool would skip the fill but splits the gradient among tied maxima "
             "(a blank background ties everywhere), so it is not the same math. Page faults from freed memory handed "
             "back to the system: 87–153 a step; glibc thresholds that keep it (`MALLOC_TRIM_THRESHOLD_`, "
             "`MALLOC_MMAP_THRESHOLD_`) made them 1 a step and the step no faster (57–59 vs 60–63 ms).",
             "- *Where the rest goes*: the convolutions are 38% (row reader) and 59% (cnn reader) of the step's operator "
             "time under torch.profiler, and run at 46–50 GFLOP/s on one core against 60 for a [2048]² matmul; the "
             "max-pools with their zero-filled gradients 9–12%; the other matmuls (fc, the row reader's per-row einsum, "
             "the input projection, the heads) 6–16%; the GRU recurrence 9–10%. What would move it: fewer convolution "
             "FLOPs (the row reader's conv2 is 963 of its 1,742 MFLOP a step) or a batch large enough to keep both "
             "cores on GEMMs; torch.compile of the whole model was 0.82× (see *Training throughput*)."]
    return "\n".join(text)


def gpu_doc(docs: dict) -> Optional[dict]:
    g = docs.get("gpu")
    if g and str(g["machine"].get("device", "")).startswith("cuda") and not g.get("quick"):
        return g
    return None


def gpu_section(docs: dict, hist: Optional[dict]) -> str:
    g = gpu_doc(docs)
    text = []
    if g:
        r, m = g["results"], g["machine"]
        t = r["time_to_accuracy"]
        sbs, par = r["side_by_side"], r["parity"]
        rows = [[k, f(sbs["eager"]["ms_per_step"][k]), f(sbs["graph"]["ms_per_step"][k]),
                 f(sbs["eager"]["images_per_s"][k], 0), f(sbs["graph"]["images_per_s"][k], 0), f"{f(sbs['speedup'][k])}×",
                 sbs["graph"]["step_mode"][k]] for k in sbs["graph"]["images_per_s"]]
        prow = [[k, f(par["eager_ms_per_step"][k]), f(par["graph_ms_per_step"][k]), par["graph_step_mode"][k]]
                for k in par["graph_ms_per_step"]]
        text += [f"Measured on {m.get('device_name') or m.get('gpu')} on {m.get('date')} (`{m.get('command')}`): "
                 "`ponder.training.loop.train`'s two ways to run a step, side by side in one process: *eager* "
                 "(`cuda_graph = False`: kernels launched one by one, no per-step host sync) and *graph* (the default: "
                 "the whole step captured in a CUDA graph and replayed).", "",
                 table(["batch", "eager ms / step", "graph ms / step", "eager images / s", "graph images / s",
                        "graph / eager", "graph step"], rows), "",
                 f"Parity, hidden {par['hidden']}, batch {par['batch_size']}, N = {par['max_steps']}:", "",
                 table(["n", "eager ms / step", "graph ms / step", "graph step"], prow), "",
                 f"Time to {t['target_accuracy']:.1%} test accuracy: "
                 + (f"**{f(t['seconds_to_target'], 1)} s** (step {t['step_at_target']})" if t["reached"] else "not reached")
                 + f"; target ≤ {f(t['target_seconds'], 0)} s: {ok(t['met'])}. Config: batch {t['train_config']['batch_size']}, "
                 f"lr {t['train_config']['lr']}, {t['train_config']['epochs']:g} epochs, compile {t['train_config']['compile']}."]
    else:
        text += ["**Not measured in this session: no GPU was available; the GPU figures are still to be measured.** "
                 "`python -m bench gpu` runs there (it exits with a message where CUDA is absent). In one process it "
                 "times `ponder.training.loop.train`'s two ways to run a step side by side: *eager* (`cuda_graph = False`: "
                 "forward, backward, clipping and the fused Adam launched kernel by kernel, no per-step host sync) and "
                 "*graph* (the default: the whole step — forward, backward, clipping, capturable fused Adam — captured "
                 "in a CUDA graph and replayed): MNIST train images/s at N = 20 for batch 128, 512 and 2048, and parity "
                 "ms per step at n = 15 and n = 64 (GRU 128, batch 1024). It then measures the time to 99.0% test "
                 "accuracy with the graph step, like benchmark 2 (weight snapshots from the callback, evaluated "
                 f"afterwards). Targets: ≤ {f(GPU_TARGET_S, 0)} s to 99.0%, parity n = 15 ≤ 2 ms per step."]
    if hist:
        first, prev = hist.get("first_val_at_target"), hist.get("previous_val")
        rows = [[f(p["epoch"], 0), f(p["elapsed"], 1), f(p["val_accuracy"], 4)] for p in hist["val_points"]]
        text += ["", f"**From the training history of the shipped `{hist['run']}`** (an earlier run, not this benchmark: "
                 f"its `run.json` card says {hist['device']}, created {hist['created']}, batch {hist['batch_size']}, "
                 f"N {hist['max_steps']}, {hist['epochs']} epochs, {hist['steps']} steps in {hist['train_seconds']} s, "
                 f"and the code before this benchmark work). Its `metrics.jsonl` records *validation* accuracy (5,000 "
                 "held-out training images), not test accuracy, and only at epoch ends:", "",
                 table(["epoch", "elapsed s", "validation accuracy"], rows), ""]
        if first:
            text.append(f"The first epoch-end validation at or above {hist['target']:.0%} came at {f(first['elapsed'], 1)} s "
                        f"(epoch {f(first['epoch'], 0)}, {f(first['val_accuracy'], 4)})"
                        + (f"; the one before, at {f(prev['elapsed'], 1)} s, was {f(prev['val_accuracy'], 4)}" if prev else "")
                        + f". Over the whole run it trained about {f(hist['images_per_s'], 0)} images/s including "
                        f"validation passes; its final test accuracy is {f(hist['test_accuracy'], 4)}.")
        if first and first["elapsed"] > GPU_TARGET_S:
            text += ["", f"By that history the earlier run would miss the {f(GPU_TARGET_S, 0)}-second target "
                     f"({f(first['elapsed'], 1)} s to its first epoch-end validation at {hist['target']:.0%}; the crossing "
                     f"lies somewhere after {f(prev['elapsed'] if prev else 0.0, 1)} s). At batch {hist['batch_size']} a GPU "
                     "step is bound by kernel launches (N = 20 sequential small steps forward and backward), not by "
                     "arithmetic, and by the host waiting on the GPU several times a step. What would close it: the "
                     "training step of ponder/training/fastpath.py (no per-step host sync, the whole step captured in a CUDA graph and "
                     "replayed), fewer operators per step (the changes above), and a larger batch with a scaled "
                     "learning rate (`--batch-size 512 --lr 4e-3`), all to be measured with `python -m bench gpu`."]
    return "\n".join(text)


# ----------------------------------------------------------------------------- document

PAGES_FILE = "pages_timing.json"     # a list of `python -m bench.pages_timing` results (its --out JSON files)


def pages_section(runs: list) -> str:
    """The explorer's pages timed in Chromium and the server's memory (bench/pages_timing.py), one block per run."""
    from .pages_timing import render as render_run
    text = ["Each page from `page.goto` to its first Plotly chart drawn and to complete (every chart drawn, the "
            "script run ended, nothing loading), in headless Chromium against `streamlit run` on 127.0.0.1; warm: a "
            "new tab of a browser that opened the page before (a new session; the server's caches filled), fresh: "
            "the first visit after a server start from a new browser context. Trees compared in one run have their "
            "visits interleaved page by page, so the machine's load falls on both alike; with other work on the "
            "2 cores, absolute times are several times a quiet machine's."]
    for run in runs:
        text += [""] + render_run(run)
    return "\n".join(text)


def render(docs: dict, pages: list = ()) -> str:
    hist = history_summary()
    quick = [n for n, d in docs.items() if d.get("quick")]
    parts = ["# Benchmarks", "",
             "*Generated by `python -m bench report` from `docs/bench/*.json`; do not edit by hand. Re-measure with "
             "`python -m bench all` (CPU; about five minutes) and `python -m bench gpu` (on a CUDA machine).*", "",
             "Every comparison is a ratio of numbers measured side by side, in one run, on the same machine. Each "
             "benchmark prints a table and writes its JSON (machine, config, results) to `docs/bench/`; "
             "`python -m bench <name> --quick` is a seconds-long smoke run (`tests/test_bench_smoke.py`)."]
    if quick:
        parts += ["", f"**Warning: {', '.join(quick)} come from --quick smoke runs, not measurements.**"]
    parts += ["", "## Summary", "", summary_section(docs, hist), "", "## Machine", "", machine_section(docs) if docs else "No results yet."]
    if "throughput" in docs:
        parts += ["", "## 1. Training throughput", "", throughput_section(docs["throughput"])]
    if "time_to_accuracy" in docs:
        parts += ["", "## 2. Time to accuracy (CPU)", "", time_to_accuracy_section(docs["time_to_accuracy"])]
    if "early_exit" in docs:
        parts += ["", "## 3. Early exit", "", early_exit_section(docs["early_exit"])]
    if "latency" in docs:
        parts += ["", "## 4. Explorer latency", "", latency_section(docs["latency"])]
    if pages:
        parts += ["", "## 4b. Pages in a browser", "", pages_section(pages)]
    parts += ["", "## 5. GPU", "", gpu_section(docs, hist)]
    if "profile" in docs:
        parts += ["", "## Profile: where a training step's time goes", "",
                  profile_section(docs["profile"], docs.get("throughput"))]
    parts += ["", "## Reproduce", "", "```bash",
              "PONDER_DATA=../shared/data python -m bench all        # CPU benchmarks + this document",
              "python -m bench throughput --rounds 3 --compile      # one benchmark; see --help",
              "python -m bench gpu                                  # on a CUDA machine, then: python -m bench report",
              "python -m bench report                               # re-render from docs/bench/*.json",
              "```", ""]
    return "\n".join(parts)


def write_report(results_dir: Path, doc: Path) -> Path:
    docs = load(results_dir)
    pages = Path(results_dir) / PAGES_FILE
    text = render(docs, json.loads(pages.read_text()) if pages.exists() else ())
    doc = Path(doc)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)
    print(f"wrote {doc} from {len(docs)} result file(s) in {results_dir}")
    return doc
