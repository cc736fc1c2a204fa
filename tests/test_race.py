"""The racing arithmetic of tuning (bench.sweep.race) on synthetic throughputs: what it drops, when it stops, and
that it keeps to its budget."""
import random

from bench.sweep import race


def windows(centre: float, spread: float = 0.02, n: int = 8, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [centre * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_a_setting_is_dropped_only_once_its_interval_lies_below_the_leaders():
    samples = {"": windows(1000), "bucket_cap_mb=100.0": windows(1300, seed=1),
               "bucket_cap_mb=5.0": windows(1010, seed=2), "bucket_cap_mb=1.0": windows(700, seed=3)}
    assert race.leader(samples) == "bucket_cap_mb=100.0"
    assert race.dropped(samples) == {"", "bucket_cap_mb=5.0", "bucket_cap_mb=1.0"}
    # Overlapping intervals: a tie keeps both in the race
    close = {"": windows(1000, spread=0.1), "bucket_cap_mb=5.0": windows(1030, spread=0.1, seed=4)}
    assert race.dropped(close) == set()
    assert race.dropped({"": windows(1000)}) == set()  # the last one standing


def test_the_race_stops_when_every_approach_has_one_setting_left():
    settled = {"torch-ddp": {"bucket_cap_mb=100.0": windows(1300)}, "deepspeed": {"": windows(900)}}
    full = {"torch-ddp": 60, "deepspeed": 60}
    assert race.next_round(settled, spent_s=0, budget_s=3600, short_run_s=10, full_runs_s=full) == []
    racing = {**settled, "deepspeed": {"": windows(900), "overlap_comm=true": windows(905, seed=5)}}
    assert race.next_round(racing, 0, 3600, 10, full) == [race.Entry("deepspeed", ""),
                                                          race.Entry("deepspeed", "overlap_comm=true")]


def test_a_round_that_would_eat_into_the_confirmation_is_not_run():
    racing = {"torch-ddp": {"": windows(1000), "static_graph=true": windows(1010, seed=6)}}
    confirm = race.confirmation_s([60])  # best and default, 3 full runs each
    assert confirm == 360 and race.confirmation_s([60, 30]) == 540  # each approach at its own full run's cost
    full = {"torch-ddp": 60}
    assert race.next_round(racing, spent_s=0, budget_s=confirm + 20, short_run_s=10, full_runs_s=full)
    assert race.next_round(racing, spent_s=1, budget_s=confirm + 20, short_run_s=10, full_runs_s=full) == []


def test_a_simulated_race_keeps_to_its_budget_and_finds_the_best_setting():
    """Settings 2 % apart per step of a bucket size, each short run 8 noisy windows: raced round after round."""
    truth = {"torch-ddp": {"": 1000, "bucket_cap_mb=1.0": 820, "bucket_cap_mb=5.0": 960, "bucket_cap_mb=100.0": 1150},
             "deepspeed": {"": 800, "overlap_comm=true": 805, "reduce_bucket_size=500000": 600}}
    budget, short, full = 1200.0, 12.0, {"torch-ddp": 60.0, "deepspeed": 60.0}
    state = {a: {k: [] for k in settings} for a, settings in truth.items()}
    spent, seed = 0.0, 0
    while entries := race.next_round(state, spent, budget, short, full):
        for entry in entries:
            seed += 1
            state[entry.approach][entry.knobs] += windows(truth[entry.approach][entry.knobs], spread=0.05, seed=seed)
            spent += short
        state = race.prune(state)
    assert spent + race.confirmation_s(full.values()) <= budget
    assert race.leader(state["torch-ddp"]) == "bucket_cap_mb=100.0" and len(state["torch-ddp"]) == 1
    # ZeRO's 0.6 % apart: not told apart by the noise, both kept for the confirmation to judge; the slow one out
    assert set(state["deepspeed"]) == {"", "overlap_comm=true"}


def test_a_setting_stands_by_its_duets_interval_and_straddling_1_asks_for_another_duet():
    """Three duets at least; wholly above 1 gains, wholly below costs, wholly within 5 % of 1 is no gain worth a
    knob, and an interval across 1 that still reaches a 5 % gain is open: the next round gives it a duet."""
    import math

    def logs(*ratios):
        return [math.log(r) for r in ratios]

    assert race.decision(logs(1.06, 1.05, 1.07)) == race.GAINS
    assert race.decision(logs(0.94, 0.95, 0.96)) == race.COSTS
    assert race.decision(logs(1.00, 1.005, 0.995, 1.0)) == race.NULL
    assert race.decision(logs(1.06, 0.94, 1.02)) == race.OPEN
    assert race.decision(logs(1.06, 1.06)) == race.OPEN  # two duets: no interval yet
    duets = {"a=1": logs(1.06, 1.05, 1.07), "b=1": logs(1.10, 1.12, 1.11), "c=1": logs(1.2, 0.9, 1.0)}
    assert race.pick(duets) == "b=1"  # the surest gain with the highest mean ratio; c's mean is higher but open
    assert race.pick({"a=1": logs(0.94, 0.95, 0.96)}) == ""  # nothing gains: the defaults are kept
