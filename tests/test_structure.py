"""The layout a newcomer relies on: each approach one package named by the variants table, the harness free of
approach names and import cycles, what runs in a rank apart from the launcher, small modules."""
import ast
import re
from pathlib import Path


from bench import launch_api
from bench.run.environment import LIBRARIES
from bench.spec.variants import VARIANTS
from helpers import REPO

PACKAGES = ["bench", "probes", *sorted(p.name for p in REPO.glob("*_impl"))]


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every project module this one imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def test_no_import_cycle_counting_imports_inside_functions():
    found = modules()
    graph = {name: imports_of(name, path, set(found)) for name, path in found.items()}
    # A package's __init__ importing its own submodules is how a package is built, not a cycle.
    graph = {name: {t for t in targets if not t.startswith(name + ".")} for name, targets in graph.items()}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target, stack + [target])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_harness_names_no_approach_outside_the_variants_table():
    """Approach names live in bench/spec/variants.py; a distribution name whose version a row records (LIBRARIES)
    is a library, not an approach."""
    names = set(VARIANTS) - set(LIBRARIES)
    table = REPO / "bench" / "spec" / "variants.py"
    hits = [f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}"
            for path in (REPO / "bench").rglob("*.py") if path != table
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and node.value in names]
    assert len(names) >= 8 and hits == []


def test_what_runs_in_a_rank_imports_nothing_of_the_harness():
    found = modules()
    rank_side = [name for name in found if name.startswith("bench.worker")]
    assert {"bench.worker", "bench.worker.clock", "bench.worker.data", "bench.worker.s3"} <= set(rank_side)
    harness = ("bench.run", "bench.hosts", "bench.sweep", "bench.studies", "bench.analysis", "bench.cli",
               "bench.commands", "bench.request", "bench.regress", "bench.results", "bench.engines")
    for name in rank_side:
        assert not {t for t in imports_of(name, found[name], set(found)) if t.startswith(harness)}, name


def test_the_spec_modules_a_rank_loads_import_only_the_standard_library():
    found = modules()
    loaded = ("bench.spec.rank_spec", "bench.spec.rank_record", "bench.spec.task", "bench.spec.models",
              "bench.spec.frameworks", "bench.spec.setting")
    for name in loaded:
        assert imports_of(name, found[name], set(found)) <= {"bench", "bench.spec", *loaded}, name
    assert imports_of("bench", found["bench"], set(found)) == set()  # the package's own module: none either


def test_the_approaches_reach_the_harness_through_its_launch_api_only():
    """An approach package imports no bench.run module; its launcher imports the harness only through
    bench.launch_api, which exports what the launchers use and nothing more."""
    found = modules()
    approaches = [name for name in found if name.split(".")[0].endswith("_impl")]
    assert len(approaches) > 30
    for name in approaches:
        assert not {t for t in imports_of(name, found[name], set(found)) if t.startswith("bench.run")}, name
    launchers = [name for name in approaches if name.endswith(".launch")]
    assert len(launchers) == 6  # torch, tf, jax, accelerate, deepspeed, lightning
    used = set()
    for name in launchers:
        assert {t for t in imports_of(name, found[name], set(found)) if t.startswith("bench")} == {"bench.launch_api"}
        used |= {alias.name for node in ast.walk(ast.parse(found[name].read_text()))
                 if isinstance(node, ast.ImportFrom) and node.module == "bench.launch_api" for alias in node.names}
    assert used == set(launch_api.__all__)


def test_the_harness_decides_by_the_variants_family_not_by_a_framework_names_prefix():
    """Variant.family decides; a row's recorded framework ("tensorflow-cpu", a wheel's name) keys nothing."""
    hits = []
    for path in (REPO / "bench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value in ("tensorflow", "torch")):
                hits.append(f"{path.relative_to(REPO)}:{node.lineno}: startswith({node.args[0].value!r})")
            if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "tensorflow-cpu"
                                                  for k in node.keys):
                hits.append(f"{path.relative_to(REPO)}:{node.lineno}: a dict keyed by 'tensorflow-cpu'")
    assert hits == []


def test_rows_of_either_tensorflow_wheel_read_back_as_tensorflow():
    """New rows name the `tensorflow` wheel the tf extra installs; the committed ones name `tensorflow-cpu`."""
    from bench.spec.variants import VARIANTS, current_framework, family_of

    assert {v.framework for v in VARIANTS.values() if v.family == "tensorflow"} == {"tensorflow"}
    assert family_of("tensorflow") == family_of("tensorflow-cpu") == "tensorflow"
    assert current_framework("tensorflow-cpu") == "tensorflow" == current_framework("tensorflow")
    assert family_of("deepspeed") == "torch"


def test_the_harness_asks_a_frameworks_record_and_never_compares_a_family_to_its_name():
    """A framework is one record its package declares (bench.spec.frameworks): no `family == "tensorflow"`,
    `.family is ...` or table keyed by a framework's name in the harness, so a third framework touches none of it."""
    names = {"torch", "tensorflow"}
    hits = []
    for path in (REPO / "bench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                family = any(isinstance(s, ast.Attribute) and s.attr == "family" for s in sides)
                named = any(isinstance(s, ast.Constant) and s.value in names for s in sides)
                if family and named:
                    hits.append(f"{path.relative_to(REPO)}:{node.lineno}: a family compared to its name")
            if isinstance(node, ast.Dict) and {k.value for k in node.keys if isinstance(k, ast.Constant)} >= names:
                hits.append(f"{path.relative_to(REPO)}:{node.lineno}: a table keyed by the frameworks' names")
    assert hits == []
    assert not (REPO / "bench" / "spec" / "family.py").exists()


def test_no_rank_reads_the_run_spec_by_string_key():
    """A rank reads spec.json through bench.spec.rank_spec's dataclasses: a renamed field fails at attribute
    access, where a linter and a reader see it, not as a KeyError or a silent None inside a rank."""
    lookup = re.compile(r"""\b(spec|task|worker\.spec|worker\.task|self\.spec|self\.task)(\[["']|\.get\()""")
    rank_side = [p for package in ("bench/worker", *sorted(p.name for p in REPO.glob("*_impl")), "probes")
                 for p in (REPO / package).rglob("*.py") if p.name not in ("launch.py", "options.py")]
    assert len(rank_side) > 40
    hits = [f"{p.relative_to(REPO)}:{n}" for p in rank_side for n, line in enumerate(p.read_text().splitlines(), 1)
            if lookup.search(line)]
    assert hits == []


def test_every_approach_is_named_by_the_table_and_started_by_an_approach_launcher():
    """A launcher lives in an approach package's launch.py, or is the harness's plain `python -m`."""
    for variant in VARIANTS.values():
        assert (REPO / (variant.module.replace(".", "/") + ".py")).exists(), variant.name
        launcher = variant.launcher_spec
        assert launcher.name and callable(launcher.start), variant.name
        module = variant.launch.split(":")[0]
        assert module == "bench.run.launch" or (module.endswith("_impl.launch") and "." not in module[:-7]), module


def test_the_run_key_fields_are_the_ones_the_methodology_guide_lists():
    from bench.results.key import RunKey

    guide = (REPO / "docs" / "methodology.md").read_text()
    paragraph = guide[guide.index("**The run key**"):].split("\n\n")[0]
    listed = [word.strip("`") for word in paragraph.split() if word.startswith("`") and word.rstrip(",.;:)").endswith("`")]
    assert sorted(w.rstrip("`,.;:)") for w in listed if w.rstrip("`,.;:)") in RunKey._fields) == sorted(RunKey._fields)


def test_only_the_report_commands_import_the_analysis():
    """Rows are written by run/ and results/; analysis/ reads them (the folded folder, the verdict), and the report,
    the projection and compare read it."""
    readers = ("bench.analysis", "bench.report", "bench.projection", "bench.compare", "bench.commands")
    found = modules()
    writers = [name for name in found if name.startswith("bench.") and not name.startswith(readers)]
    for name in writers:
        assert not {t for t in imports_of(name, found[name], set(found)) if t.startswith(readers[:4])}, name


def floors() -> dict[str, int]:
    """docs/architecture.md's table of the harness's floors: package -> floor."""
    text = (REPO / "docs" / "architecture.md").read_text()
    table = text[text.index("## The harness's floors"):].split("\n## ")[0]
    return {package: int(floor) for floor, packages in re.findall(r"^\| (\d+) \| ([^|]+) \|", table, re.M)
            for package in re.findall(r"`([\w.]+)`", packages)}


def test_every_harness_import_runs_down_the_floors_the_architecture_page_draws():
    found, floor_of = modules(), floors()
    assert floor_of, "docs/architecture.md has no table of floors"

    def package(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else parts[0]

    harness = [name for name in found if name.split(".")[0] == "bench"]
    assert sorted({package(n) for n in harness} - set(floor_of)) == [], "packages the table does not place"
    upward = sorted(f"{name} -> {target}" for name in harness
                    for target in imports_of(name, found[name], set(found))
                    if target.startswith("bench") and package(target) != package(name)
                    and floor_of[package(target)] >= floor_of[package(name)])
    assert upward == []


def test_no_option_is_declared_by_hand_outside_the_one_generator():
    """Every option is a field's Setting (bench.spec.setting); only its generator calls add_argument."""
    generator = REPO / "bench" / "spec" / "setting.py"
    hits = [f"{path.relative_to(REPO)}:{node.lineno}" for path in (REPO / "bench").rglob("*.py") if path != generator
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("add_argument", "add_mutually_exclusive_group", "add_argument_group")]
    assert hits == []
    calls = [node for node in ast.walk(ast.parse(generator.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"]
    assert calls, "the generator adds the options"
