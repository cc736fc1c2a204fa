"""The verdict's headline: at most three short lines per group, worded from the comparisons."""
from bench.analysis import headline
from bench.analysis.repeats import measured_runs
from bench.analysis.repeats import Ratio
from bench.analysis.verdict import Comparison, Group


def line(series: str, throughput: float, accuracy: float | None = 0.88) -> dict:
    return {"series": series, "nodes": 1, "throughput": throughput, "test_accuracy": accuracy}


def compared(series: str, value: float, low: float, high: float, noisy: bool = False, accuracy: float = 0.88):
    return Comparison(line(series, 10_000 / value, accuracy), Ratio(value, low, high, True), noisy)


def test_a_clear_winner_ties_and_the_others_in_bands_of_how_much_slower():
    group = Group("2 CPU slots", line("tf-mirrored", 19_300.0), comparisons=[
        compared("lightning", 1.05, 0.97, 1.12),                      # a tie: its interval includes 1
        compared("torch-ddp", 1.21, 1.10, 1.30), compared("accelerate", 1.28, 1.15, 1.40),
        compared("deepspeed (ZeRO-2)", 1.62, 1.50, 1.75), compared("torch-fsdp", 2.08, 1.90, 2.30)])
    assert headline.lines(group) == [
        "use tf-mirrored (19.3k samples/s); as fast within the intervals: lightning.",
        "1.2-1.3x slower: torch-ddp, accelerate; 1.6-2.1x slower: deepspeed (ZeRO-2), torch-fsdp."]


def test_a_winner_the_machine_cannot_separate_says_so_and_names_them():
    group = Group("1 CPU slot", line("tf-single", 5812.0), comparisons=[
        compared("torch-ddp", 1.19, 0.83, 1.71, noisy=True), compared("deepspeed (ZeRO-3)", 1.74, 1.19, 2.55)])
    first, bands, noisy = headline.lines(group)
    assert first == "tf-single leads (5,812 samples/s), but this machine cannot separate it from 1 other."
    assert bands == "1.7x slower: deepspeed (ZeRO-3)."
    assert noisy == "Too noisy here to separate from tf-single: torch-ddp."


def test_a_winner_less_accurate_than_one_it_beats_is_flagged_on_its_line():
    group = Group("2 GPUs", line("torch-ddp", 9000.0, accuracy=0.80), comparisons=[
        compared("torch-fsdp", 1.5, 1.3, 1.7, accuracy=0.90), compared("accelerate", 1.6, 1.4, 1.8, accuracy=0.805)])
    first, _ = headline.lines(group)
    assert first == "use torch-ddp (9,000 samples/s) (its test accuracy is below torch-fsdp's: check it)."


def test_no_synchronous_winner_and_the_console_form():
    assert headline.lines(Group("2 CPU slots")) == ["no synchronous run finished."]
    group = Group("1 CPU slot", line("tf-single", 5000.0), comparisons=[compared("torch-ddp", 1.5, 1.3, 1.7)])
    assert headline.text([("1 CPU slot", headline.lines(group))]) == [
        "1 CPU slot: use tf-single (5,000 samples/s).", "  1.5x slower: torch-ddp."]


def test_asynchronous_synthetic_and_no_sync_rows_never_appear_in_the_headline(tmp_path):
    from bench.results import ResultStore, load
    from bench.analysis import aggregate
    from test_report import row

    store = ResultStore(tmp_path)
    for r in (row("torch-ddp", 2, 7000.0), row("torch-ddp", 2, 9000.0, independent=True),
              row("tf-ps", 2, 12000.0, framework="tensorflow-cpu"), row("tf-mirrored", 2, 5000.0,
                                                                          framework="tensorflow-cpu")):
        store.append(r)
    runs = load(tmp_path)
    [(title, found)] = headline.headlines(aggregate.configurations(runs), measured_runs(runs))
    assert title.startswith("2 CPU slots") and found[0].startswith("use torch-ddp (7,000 samples/s)")
    assert "tf-ps" not in " ".join(found) and "no sync" not in " ".join(found)
    assert 1 <= len(found) <= 3
