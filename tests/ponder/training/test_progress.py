"""ponder/training/progress.py: the step forecast ("step k of about K"), the time budget's stop rule and the cancel flag."""
import itertools

from hypothesis import given, settings, strategies as st

from ponder.training.progress import StepForecast, StepTimer


def simulate(durations, every, total, budget):
    """Reports every `every` steps of the given step durations (s), as train() makes them: until the epochs
    (total) or the budget end the run; finish() at the last step. Returns [(step, forecast)] and the end step."""
    f, timer = StepForecast(total, budget), StepTimer(budget)
    out, step, elapsed = [], 0, 0.0
    for d in itertools.cycle(durations):
        if step >= total or timer.out_of_time(elapsed):
            break
        step, elapsed = step + 1, elapsed + d
        timer.add(d)
        if step % every == 0 and step < total:
            out.append((step, f.update(step, elapsed)))
    out.append((step, f.finish(step)))
    return out, step


durations = st.lists(st.floats(0.001, 2.0), min_size=1, max_size=40)


@settings(max_examples=100, deadline=None)
@given(durations, st.integers(1, 20), st.integers(1, 400), st.one_of(st.none(), st.floats(0.01, 60.0)))
def test_the_forecast_never_rises_unless_the_step_pushes_it_never_falls_below_the_step_and_ends_at_the_end(
        ds, every, total, budget):
    seq, end = simulate(ds, every, total, budget)
    prev = total
    for step, k in seq:
        assert step <= k <= total                     # never below the current step, never above the plan
        assert k <= max(prev, step)                   # it goes up only when the step itself reaches it
        prev = k
    assert seq[-1] == (end, end)                      # it is the last step at the end
    if budget is None:
        assert all(k == total for _, k in seq[:-1])   # the epochs end it: the plan is the forecast


@settings(max_examples=100, deadline=None)
@given(st.floats(0.01, 1.0), st.floats(0.0, 0.5), st.integers(1, 20), st.floats(1.0, 60.0))
def test_at_a_steady_or_slowing_rate_the_forecast_only_goes_down(d, slowdown, every, budget):
    """Steps of d seconds that grow by `slowdown` a step (the machine gets busier): strictly never up."""
    ds = [d * (1 + slowdown * i) for i in range(400)]
    seq, _ = simulate(ds, every, 10_000, budget)
    ks = [k for _, k in seq]
    assert all(b <= a for a, b in zip(ks, ks[1:]))


def test_a_machine_that_slows_down_brings_the_forecast_down_without_jumps():
    """20 fast steps (37 a second) then a loaded machine (5.6 a second), 15 s budget. The plain estimate
    (steps so far / seconds so far x budget) would say 562 at step 20 and 71 at step 84. The forecast
    starts at the plan (1,290 steps), uses no rate from the first report (start-up), then comes down as the
    slow steps really lose time, and ends on the last step."""
    ds = [1 / 37] * 20 + [1 / 5.6] * 2000
    seq, end = simulate(ds, 10, 1290, 15.0)
    ks = [k for _, k in seq]
    assert ks[0] == 1290 and all(b <= a for a, b in zip(ks, ks[1:])) and all(s <= k for s, k in seq)
    # by hand: 20 steps in 0.54 s, then 15 - 0.54 = 14.46 s at 5.6 a second = 80.97 more: ~100 in all
    assert 95 <= end <= 102 and ks[-1] == end
    # at step 20 the forecast is 20 + (15 - 20/37) x 1.25 x 37 = 688 (the first fast interval, OPTIMISM
    # 1.25), then only down
    assert seq[1] == (20, 688)


def test_a_run_that_speeds_up_a_little_never_catches_its_forecast():
    """Measured (bench/job_timing.py, 15 s budget, load falling from 9.6 to 8.7): the steps got faster after
    the first reports; without a margin the forecast said 103 from step 20 on and the run ended at 114, the
    step pushing it up from 110. Steps 15% faster after the first 30 stay under OPTIMISM's 25%."""
    ds = [0.15] * 30 + [0.15 / 1.15] * 2000
    seq, end = simulate(ds, 10, 1290, 15.0)
    assert all(s <= k for s, k in seq) and seq[-1] == (end, end)
    ks = [k for _, k in seq]
    assert all(b <= a for a, b in zip(ks, ks[1:]))


def test_the_step_timer_stops_before_a_step_that_would_end_past_the_budget():
    t = StepTimer(1.0)
    assert not t.out_of_time(0.0) and not t.out_of_time(0.99)       # no step timed yet: only the budget itself
    assert t.out_of_time(1.0)
    for d in (0.3, 0.2, 5.0):                                          # median of the last three: 0.3
        t.add(d)
    assert t.next_step() == 0.3 and not t.out_of_time(0.69) and t.out_of_time(0.7)
    assert not StepTimer(None).out_of_time(1e9)


def test_intra_op_threads_are_set_for_the_block_and_back_after():
    import torch
    from ponder.training.progress import PROCESS_THREADS, intra_op_threads
    before = torch.get_num_threads()
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == PROCESS_THREADS == before
    with intra_op_threads(None):
        assert torch.get_num_threads() == before


@given(cores=st.integers(1, 64), load=st.floats(0.0, 200.0))
def test_free_cores_leaves_the_busy_cores_and_keeps_at_least_one(cores, load):
    from ponder.training.progress import free_cores
    n = free_cores(cores, load)
    assert 1 <= n <= cores
    assert n == max(1, cores - round(load))                      # the cores the load leaves free
    assert free_cores(cores, load + 1.0) <= n                    # more load, never more threads


def test_free_cores_on_a_2_core_machine():
    from ponder.training.progress import free_cores, machine_cores_and_load
    # on 2 cores: quiet, one background training, a loaded machine
    assert [free_cores(2, load) for load in (0.0, 0.4, 1.0, 1.6, 2.8, 6.0)] == [2, 2, 1, 1, 1, 1]
    cores, load = machine_cores_and_load()
    assert cores >= 1 and load >= 0.0


def test_free_threads_are_the_free_cores_unless_omp_num_threads_is_set(monkeypatch):
    from ponder.training import progress
    monkeypatch.setattr(progress, "machine_cores_and_load", lambda: (2, 1.3))      # one core busy elsewhere
    assert progress.free_threads(environ={}) == 1
    monkeypatch.setattr(progress, "machine_cores_and_load", lambda: (8, 2.2))
    assert progress.free_threads(environ={"OMP_NUM_THREADS": " "}) == 6
    assert progress.free_threads(environ={"OMP_NUM_THREADS": "3"}) == progress.PROCESS_THREADS


def test_a_cancel_keeps_its_first_reason_and_a_plain_event_is_just_cancelled():
    import threading
    from ponder.training.progress import Cancel, cancel_reason
    c = Cancel()
    assert not c.is_set() and c.why == ""
    c.stop("stopped by the owner")
    c.stop("a later reason")                          # the first one stays
    assert c.is_set() and cancel_reason(c) == "stopped by the owner"
    plain, bare = threading.Event(), Cancel()
    plain.set()
    bare.set()                                        # set() is stop("cancelled")
    assert cancel_reason(plain) == cancel_reason(bare) == "cancelled"


def test_train_starts_a_cancelled_runs_reason_with_the_cancels_words():
    from ponder.config import TrainConfig
    from ponder.training.progress import Cancel
    from ponder.training.loop import train
    c = Cancel()
    c.stop("stopped by the test")
    r = train(TrainConfig(task="parity", hidden=8, batch_size=8, max_steps=3, epochs=1.0, steps_per_epoch=5, device="cpu"),
              cancel=c)
    assert (r.record.status, r.record.reason, r.record.steps) == ("cancelled", "stopped by the test at step 0", 0)
