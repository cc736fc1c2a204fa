"""`bench regress`'s verdict in the formats CI pages read: github-action-benchmark's custom JSON (one file for
figures where bigger is better, one where smaller is: `customBiggerIsBetter`, `customSmallerIsBetter`) and JUnit
XML (a test case a configuration and figure: a regression fails it, a configuration that could not be compared
skips it). Written beside verdict.json by bench.regress.compare, which hands in its verdicts and its figures
(`metrics`: each figure's unit and which way is better)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path


BIGGER, SMALLER, JUNIT = "benchmark-bigger-is-better.json", "benchmark-smaller-is-better.json", "junit.xml"
FAILS = ("regression", "failed")
SKIPS = ("missing", "mismatch")


def benchmark_entries(verdicts: list, metrics: dict, bigger: bool, machine: str = "") -> list[dict]:
    """github-action-benchmark's entries (name, unit, value; range and extra as text) for the current side's
    figures that are better the `bigger` way. The extra names the machine, so that `bench history` reading the
    action's data.js splits the series where the runner changed."""
    return [{"name": f"{v.key} {v.metric}", "unit": metrics[v.metric].unit or "fraction", "value": v.current,
             "range": v.interval, "extra": f"{v.verdict}; baseline {v.baseline:.6g}; {v.test}"
             + (f"; p {v.p_value:.3g}" if v.p_value is not None else "") + (f"; machine {machine}" if machine else "")}
            for v in verdicts if v.metric in metrics and metrics[v.metric].higher_is_better == bigger
            and v.current is not None and v.baseline is not None]


def junit(verdicts: list) -> ET.ElementTree:
    """<testsuites><testsuite> with a <testcase> a verdict: <failure> for a regression (or a current side that
    failed), <skipped> where the two sides could not be compared."""
    counts = {"tests": str(len(verdicts)), "failures": str(sum(v.verdict in FAILS for v in verdicts)),
              "skipped": str(sum(v.verdict in SKIPS for v in verdicts)), "errors": "0"}
    root = ET.Element("testsuites", name="dtbench", **counts)
    suite = ET.SubElement(root, "testsuite", name="dtbench regress", **counts)
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=v.key, name=v.metric)
        said = (f"{v.verdict}: baseline {v.baseline}, current {v.current}, ratio {v.ratio}, {v.interval}, "
                f"{v.test}, p {v.p_value}")
        if v.verdict in FAILS:
            ET.SubElement(case, "failure", message=v.verdict, type=v.verdict).text = said
        elif v.verdict in SKIPS:
            ET.SubElement(case, "skipped", message=said)
        else:
            ET.SubElement(case, "system-out").text = said
    return ET.ElementTree(root)


def write(out: Path, verdicts: list, metrics: dict, machine: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / BIGGER).write_text(json.dumps(benchmark_entries(verdicts, metrics, True, machine), indent=1))
    (out / SMALLER).write_text(json.dumps(benchmark_entries(verdicts, metrics, False, machine), indent=1))
    junit(verdicts).write(out / JUNIT, encoding="utf-8", xml_declaration=True)
