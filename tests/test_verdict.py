"""The verdict from fabricated rows: ties, clear differences, repeats that disagree, context that never wins."""
import numpy as np
import pytest

from bench.analysis import model_pairs, repeats, verdict
from bench.analysis import aggregate
from bench.results import ResultStore
from bench.results.frame import frame
from bench.analysis.folder import Folder
from helpers import result_row

TASK = {"name": "default", "model": "small-cnn", "dataset": "fashion-mnist", "precision": "fp32",
        "global_batch": 128, "target_accuracy": 0.85, "params": 105866}


def run(variant, median, *, world=2, spread=0.01, accuracy=0.88, repeat=0, memory=800.0, **task):
    """One ok run whose ten windows lie within ±spread of `median` (a fixed, symmetric pattern)."""
    windows = [float(w) for w in median * (1 + spread * np.linspace(-1, 1, 10))]
    independent = task.pop("independent", False)
    return result_row(variant, world, run_id=f"{variant}-{world}-{median}-{repeat}-{task}", task={**TASK, **task},
                      independent=independent, test_accuracy=None if independent else accuracy,
                      peak_memory_mb=memory,
                      throughput={"median": median, "ci_low": windows[2], "ci_high": windows[-3], "windows": windows})


def lines(rows):
    runs = frame([r.to_dict() for r in rows])
    return verdict.lines(aggregate.configurations(runs), runs)


def test_a_ratio_whose_interval_includes_one_is_a_tie():
    [text, *_] = lines([run("torch-ddp", 1000.0, spread=0.05), run("accelerate", 1010.0, spread=0.05)])
    assert text.startswith("2 CPU slots, default task (small-cnn at 28 px), fp32, strong scaling: accelerate and torch-ddp tie (ratio 1.01 [")
    assert "beats" not in text


def test_a_clear_difference_is_ranked_with_its_interval_and_the_accuracies():
    [text, *notes] = lines([run("torch-ddp", 2000.0, accuracy=0.887), run("tf-mirrored", 1000.0, accuracy=0.888)])
    assert "torch-ddp is fastest (2,000 samples/s" in text
    assert "torch-ddp beats tf-mirrored by 2.00x [" in text and "at the same accuracy (88.7 % vs 88.8 %)" in text
    assert any("ran once" in n for n in notes)  # the intervals came from the windows: the verdict says so


def test_repeats_give_an_interval_from_the_run_medians():
    rows = [run("torch-ddp", m, repeat=i) for i, m in enumerate((2000.0, 2040.0, 1980.0))]
    rows += [run("tf-mirrored", m, repeat=i) for i, m in enumerate((1000.0, 990.0, 1010.0))]
    measured = repeats.measured_runs(frame([r.to_dict() for r in rows]))
    fast, slow = (measured[k] for k in measured)
    between = repeats.ratio(fast, slow)
    assert between.from_runs and between.low < 2.0 < between.high and not between.tie
    assert between.value == pytest.approx(np.exp(np.mean(np.log(fast.medians)) - np.mean(np.log(slow.medians))))
    [text, *notes] = lines(rows)
    assert "torch-ddp is fastest" in text and not any("ran once" in n for n in notes)


def test_repeats_that_disagree_beyond_their_windows_are_too_noisy_to_rank():
    rows = [run("torch-ddp", 1000.0, repeat=0), run("torch-ddp", 1500.0, repeat=1),
            run("accelerate", 1200.0, repeat=0, spread=0.05), run("accelerate", 1250.0, repeat=1, spread=0.05)]
    [text, *_] = lines(rows)
    assert "Too noisy here to rank torch-ddp against accelerate" in text
    assert "torch-ddp's 2 runs gave 1,000 and 1,500 samples/s (1.50x apart)" in text
    assert "--repeats 5" in text and "quieter machine" in text
    assert " tie " not in text and "beats" not in text
    spread = repeats.measured_runs(frame([r.to_dict() for r in rows]))
    ddp, acc = spread.values()
    assert ddp.disagree and not acc.disagree
    assert ddp.max_over_min == 1.5 and ddp.cv == pytest.approx(np.std([1000, 1500], ddof=1) / 1250)


def test_a_gap_larger_than_the_run_to_run_noise_is_still_ranked():
    rows = [run("torch-ddp", m, repeat=i) for i, m in enumerate((4000.0, 4400.0, 4200.0))]
    rows += [run("tf-mirrored", m, repeat=i) for i, m in enumerate((1000.0, 1010.0, 990.0))]
    [text, *_] = lines(rows)
    assert "torch-ddp is fastest" in text and "torch-ddp beats tf-mirrored by 4.2" in text and "noisy" not in text


def test_asynchronous_synthetic_and_no_sync_runs_never_win():
    rows = [run("torch-ddp", 1000.0), run("tf-mirrored", 500.0), run("torch-ddp", 9000.0, independent=True),
            run("torch-ddp", 8000.0, input="synthetic"), run("tf-ps", 7000.0)]
    [text, *_] = lines(rows)
    assert "torch-ddp is fastest (1,000 samples/s" in text and "torch-ddp beats tf-mirrored by 2.00x" in text
    assert "tf-ps (asynchronous) runs at 7.00x of it, updating asynchronously (not ranked)" in text
    assert "torch-ddp reaches 11 % of its no-sync bound" in text
    assert "synthetic" not in text


def test_an_accuracy_beyond_the_tolerance_is_flagged():
    [text, *_] = lines([run("torch-ddp", 2000.0, accuracy=0.80), run("tf-mirrored", 1000.0, accuracy=0.88)])
    assert "Accuracy flagged, more than 1 point from torch-ddp's 80.0 %: tf-mirrored 88.0 %" in text
    assert "torch-ddp's accuracy (80.0 %) is below the task's target (85.0 %)" in text
    assert "same accuracy" not in text


def test_each_device_count_is_its_own_comparison_and_memory_is_stated():
    rows = [run("torch-ddp", 1000.0, world=1), run("accelerate", 1500.0, world=1, memory=1200.0),
            run("torch-ddp", 1800.0, world=2)]
    first, second, *_ = lines(rows)
    assert first.startswith("1 CPU slot,") and "accelerate is fastest (1,500 samples/s, 1,200 MiB per device)" in first
    assert "Memory per device: torch-ddp 800 MiB" in first
    assert second.startswith("2 CPU slots,") and "torch-ddp is the only synchronous approach measured" in second
    assert "scaling efficiency 0.90" in second  # 1800 / (2 x 1000)


def test_verdict_lines_read_a_results_folder(tmp_path):
    store = ResultStore(tmp_path)
    for r in (run("torch-ddp", 2000.0), run("tf-mirrored", 1000.0)):
        store.append(r)
    assert verdict.verdict_lines(Folder.read(tmp_path))[0].startswith("2 CPU slots, default task")
    assert verdict.verdict_lines(Folder.read(tmp_path / "empty")) == []


def test_the_beaten_are_listed_from_the_closest_ratio_down_not_by_their_median_run():
    """accelerate's median run (900) is above torch-ddp's (885), but one slow run puts its ratio (from every run)
    further from the winner's: the sentence, like the plot, reads in the ratios' order."""
    rows = [run("tf-mirrored", m, repeat=i) for i, m in enumerate((1000.0, 1001.0, 999.0, 1000.0, 1000.0))]
    rows += [run("accelerate", m, repeat=i) for i, m in enumerate((900.0, 900.0, 900.0, 900.0, 800.0))]
    rows += [run("torch-ddp", m, repeat=i) for i, m in enumerate((884.0, 885.0, 886.0, 885.0, 885.0))]
    [text, *_] = lines(rows)
    assert "tf-mirrored beats torch-ddp by 1.13x [" in text and "and accelerate by 1.14x [" in text, text


def paired(variant, median, params, flops, model="efficientnet_b0"):
    row = run(variant, median, model=model, params=params)
    row.flops_per_sample = flops
    return row


def test_two_frameworks_builds_of_one_name_are_ranked_together_only_when_they_are_the_same_model():
    same = lines([paired("torch-ddp", 2000.0, 4_020_000, 30e6), paired("tf-mirrored", 1000.0, 4_050_000, 31e6)])
    assert "torch-ddp beats tf-mirrored by 2.00x" in same[0]
    apart = lines([paired("torch-ddp", 2000.0, 4_020_000, 30e6), paired("torch-fsdp", 1000.0, 4_020_000, 30e6),
                   paired("tf-mirrored", 1500.0, 4_050_000, 40e6), paired("tf-multiworker", 1400.0, 4_050_000, 40e6)])
    torch_side = next(line for line in apart if "PyTorch's build" in line)
    tf_side = next(line for line in apart if "TensorFlow's build" in line)
    assert "not the same model as the other framework's: FLOPs per sample 25% apart" in torch_side
    assert "torch-ddp beats torch-fsdp" in torch_side and "tf-mirrored" not in torch_side
    assert "tf-mirrored" in tf_side and "torch-ddp" not in tf_side
    runs = frame([r.to_dict() for r in [paired("torch-ddp", 2000.0, 4_020_000, 30e6),
                                         paired("tf-mirrored", 1500.0, 4_050_000, 40e6)]])
    [table] = [b.content for b in model_pairs.section(aggregate.configurations(runs)) if b.kind == "table"]
    assert table.to_dict("records") == [{
        "model": "efficientnet_b0", "PyTorch params": "4,020,000", "TensorFlow params": "4,050,000",
        "PyTorch MFLOPs/sample": "30.0", "TensorFlow MFLOPs/sample": "40.0",
        "ranked together": "no: not the same model (FLOPs per sample 25% apart)"}]


def test_runs_of_two_models_on_one_task_never_fold_together_and_each_model_has_its_verdict():
    rows = [run("torch-ddp", 2000.0), run("torch-fsdp", 1000.0),
            run("torch-ddp", 500.0, model="timm:resnet18"), run("torch-fsdp", 700.0, model="timm:resnet18")]
    text = lines(rows)
    assert any(t.startswith("2 CPU slots, default task (small-cnn at 28 px), fp32") and "torch-ddp beats torch-fsdp" in t for t in text)
    assert any(t.startswith("2 CPU slots, default task (timm:resnet18)") and "torch-fsdp beats torch-ddp"
               in t for t in text)


def test_runs_with_knobs_set_are_ranked_each_approach_at_its_best_never_with_the_runs_as_shipped():
    rows = [run("torch-ddp", 1000.0), run("deepspeed", 900.0, zero_stage=2),
            run("torch-ddp", 1500.0, knobs="bucket_cap_mb=100.0"), run("torch-ddp", 800.0, knobs="bucket_cap_mb=1.0"),
            run("deepspeed", 1200.0, zero_stage=2, knobs="overlap_comm=true"),
            run("lightning", 950.0)]  # no knob of its own measured: at its best as shipped
    shipped, tuned = lines(rows)[:2]
    assert "torch-ddp is fastest (1,000 samples/s" in shipped and "bucket_cap_mb" not in shipped
    assert verdict.TUNED in tuned and verdict.TUNED not in shipped
    assert "torch-ddp (bucket_cap_mb=100.0) is fastest (1,500 samples/s" in tuned
    assert "overlap_comm=true" in tuned and "lightning" in tuned  # each approach once, at its best
    assert "1,000" not in tuned and "bucket_cap_mb=1.0" not in tuned and "900" not in tuned
