"""The report's section on each approach at its best, from fabricated rows: the gain over the defaults with its
interval, the knob that made it, a setting that changes the arithmetic named with its accuracy, whether the
ranking changed, and the figure of each approach as shipped and at its best."""
from bench.analysis import aggregate, repeats, tuned, verdict
from bench.analysis.folder import Folder
from bench.report.report import write_report
from bench.results import ResultStore
from bench.results.frame import frame
from test_verdict import run


def rounds(*specs) -> list:
    """Three interleaved repeats of each (variant, median, task settings), a run's median moving by 1 % a round."""
    return [run(variant, median * (1 + 0.01 * i), repeat=i, **task) for i in range(3) for variant, median, task in specs]


def at_best(rows):
    runs = frame([r.to_dict() for r in rows])
    configs = aggregate.configurations(runs)
    measured = repeats.measured_runs(runs)
    return tuned.entries(verdict.groups(configs, measured), configs, measured)


def test_each_approach_at_its_best_against_its_defaults_with_the_gain_and_the_knob():
    [(group, found)] = at_best(rounds(("torch-ddp", 1000.0, {}), ("torch-ddp", 1500.0, {"knobs": "bucket_cap_mb=100.0"}),
                                      ("torch-ddp", 900.0, {"knobs": "bucket_cap_mb=1.0"}),
                                      ("deepspeed", 1100.0, {"zero_stage": 2}),
                                      ("deepspeed", 1050.0, {"zero_stage": 2, "knobs": "overlap_comm=true"})))
    assert verdict.TUNED in group.title and group.as_shipped.winner["variant"] == "deepspeed"
    ddp, zero = found
    assert (ddp.setting, ddp.knobs_changed, ddp.settings) == ("bucket_cap_mb=100.0", ["bucket_cap_mb"], 3)
    assert ddp.gain.from_runs and ddp.gain.low < 1.5 < ddp.gain.high and not ddp.gain.tie
    assert (zero.setting, zero.gain, zero.settings) == ("", None, 2)  # its defaults beat its one setting
    table = tuned.table(found).to_dict("records")
    assert table[0]["gain [95% CI]"].startswith("1.50x [") and table[0]["as shipped (samples/s)"] == "1,010"
    assert table[1]["gain [95% CI]"] == "its defaults are its best" and table[1]["best setting"] == "(defaults)"
    assert tuned.ranking_change(group).startswith("The ranking changes: as shipped deepspeed (ZeRO-2) leads; at "
                                                  "their best torch-ddp (bucket_cap_mb=100.0) does")


def test_a_ranking_that_holds_says_so_and_a_knob_that_changes_the_arithmetic_is_named_with_its_accuracy():
    [(group, found)] = at_best(rounds(("torch-ddp", 1000.0, {}), ("deepspeed", 800.0, {"zero_stage": 2}),
                                      ("torch-ddp", 1100.0, {"knobs": "comm_hook=bf16_compress", "accuracy": 0.86})))
    assert tuned.ranking_change(group) == "The ranking is unchanged: torch-ddp leads as shipped and at their best."
    assert found[0].changes_arithmetic == ["comm_hook"]
    [bullets] = [b.content for b in tuned.section([(group, found)]) if b.kind == "bullets"]
    assert any("comm_hook=bf16_compress changes the arithmetic: test accuracy 88.0 %, 86.0 %" in b for b in bullets)
    assert tuned.table(found).to_dict("records")[0]["knob that mattered"] == "comm_hook (changes the arithmetic)"


def test_a_folder_without_knobs_has_no_such_section_and_one_with_them_its_figure(tmp_path):
    assert at_best(rounds(("torch-ddp", 1000.0, {}), ("deepspeed", 800.0, {"zero_stage": 2}))) == []
    store = ResultStore(tmp_path)
    for row in rounds(("torch-ddp", 1000.0, {}), ("torch-ddp", 1200.0, {"knobs": "bucket_cap_mb=100.0"}),
                      ("deepspeed", 800.0, {"zero_stage": 2})):
        store.append(row.to_dict())
    report = write_report(Folder.read(tmp_path)).read_text()
    assert "### Each approach at its best" in report and "default-fp32-strong-tuned.png" in report
    assert (tmp_path / "default-fp32-strong-tuned.png").stat().st_size > 10_000
    assert report.index("## Verdict") < report.index("### Each approach at its best")


def test_a_tuned_batch_ranks_beside_its_recipes_and_is_a_best_only_where_its_accuracy_reaches_the_target():
    """batch_scale=2 trains at twice the global batch: it is ranked with the runs at the recipe's batch, not apart, and
    being a knob that changes the arithmetic it is an approach's best only at the task's target accuracy (85 %)."""
    doubled = {"knobs": "batch_scale=2.0", "global_batch": 256}
    [(group, [ddp, _])] = at_best(rounds(("torch-ddp", 1000.0, {}), ("deepspeed", 1100.0, {"zero_stage": 2}),
                                         ("torch-ddp", 1600.0, {**doubled, "accuracy": 0.86})))
    assert (ddp.setting, ddp.best["global_batch"], ddp.shipped["global_batch"]) == ("batch_scale=2.0", 256, 128)
    assert ddp.changes_arithmetic == ["batch_scale"] and "batch 128" not in group.title
    [(group, [zero, ddp])] = at_best(rounds(("torch-ddp", 1000.0, {}), ("deepspeed", 1100.0, {"zero_stage": 2}),
                                            ("torch-ddp", 1600.0, {**doubled, "accuracy": 0.80})))
    assert ddp.setting == "" and ddp.best["throughput"] < zero.best["throughput"]  # below the target: its defaults


def test_a_tuning_whose_defaults_all_won_says_what_it_raced_from_its_search_folder(tmp_path):
    """Its confirmation ran the defaults only (no knob in the ranked rows): the section says what the short runs
    in search/ tried, never ranking them."""
    store, search = ResultStore(tmp_path), ResultStore(tmp_path / "search")
    for row in rounds(("torch-ddp", 1000.0, {}), ("deepspeed", 800.0, {"zero_stage": 2})):
        store.append(row.to_dict())
    for row in (run("torch-ddp", 990.0), run("torch-ddp", 950.0, knobs="bucket_cap_mb=1.0"),
                run("deepspeed", 790.0, zero_stage=2)):
        search.append(row.to_dict())
    report = write_report(Folder.read(tmp_path)).read_text()
    section = report[report.index("### Each approach at its best"):]
    assert "in every approach its defaults won the race" in section
    assert "| torch-ddp " in section and "bucket_cap_mb=1.0 (950)" in section and "| deepspeed (ZeRO-2) " in section
    assert report.index("## Verdict") < report.index("### Each approach at its best")
    store.append(run("torch-ddp", 1100.0, repeat=9, knobs="bucket_cap_mb=100.0").to_dict())  # a setting won
    assert "its defaults won the race" not in write_report(Folder.read(tmp_path)).read_text()
