"""`bench list` and `bench schema`: what the harness knows, printed."""
from __future__ import annotations


from bench.request import Request
from bench.spec import devices, frameworks, knobs, models
from bench.spec.task import CPU_IMAGE_SIZE, PRESETS
from bench.spec.variants import VARIANTS


def cmd_list(args: Request) -> int:
    machine = devices.discover()
    print("variants:")
    for v in VARIANTS.values():
        where = f"cpu ({v.cpu_max_per_node}/node), cuda" if v.cpu_max_per_node else "cpu, cuda"
        why = v.not_installed()
        missing = f"  [not installed: {why.partition(': ')[2]}]" if why else ""
        print(f"  {v.name:16} {where:20} launcher={v.launcher:9} {v.summary}{missing}")
    print("not offered yet:")
    for framework in frameworks.registry().values():
        for line in framework.not_offered:
            print(f"  {framework.title}: {line}")
    print("tasks:")
    for t in PRESETS.values():
        on_cpu = f" ({CPU_IMAGE_SIZE[t.name]}px on a CPU)" if t.name in CPU_IMAGE_SIZE else ""
        print(f"  {t.name:16} {t.model.name:16} on {t.data.dataset:14} {t.model.image_size}px{on_cpu} "
              f"batch={t.recipe.global_batch} epochs={t.recipe.epochs} {t.recipe.optimizer} {t.recipe.precision}")
    partial = "; ".join(f"{f.title} {', '.join(f.built_in_models)} only" for f in frameworks.registry().values()
                        if f.built_in_models is not None)
    print("models (--model): built in:", ", ".join(models.BUILT_IN) + (f" ({partial})" if partial else ""))
    print("  named once, timm's for PyTorch and keras.applications' for TensorFlow:", ", ".join(models.PAIRED))
    print("  any other as timm:NAME, torchvision:NAME, keras:NAME, or your own with --model-module PKG.MODULE:FN")
    print("knobs (bench run --set NAME=VALUE): the framework's default, then the values worth trying")
    for name, k in [(v.name, k) for v in VARIANTS.values() for k in knobs.declared(v.knobs)] + [
            ("every approach", k) for k in knobs.COMMON]:
        tries = ", ".join(k.text(t) for t in k.tries)
        changes = "  [changes the arithmetic]" if k.changes_arithmetic else ""
        print(f"  {name:16} {k.name:30} {k.text(k.default)} | {tries}{changes}  {k.help}")
    print("devices:")
    print(f"  cpu: {len(machine.cores)} cores available ({', '.join(map(str, machine.cores))})")
    if machine.gpus:
        for gid, name in zip(machine.gpus, machine.gpu_names):
            print(f"  cuda:{gid} {name}")
    else:
        print("  cuda: none found")
    return 0


def cmd_schema(args: Request) -> int:
    import json

    from bench.results.schema import row_schema

    print(json.dumps(row_schema(), indent=1))
    return 0
