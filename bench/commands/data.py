"""`bench data`: the tasks' datasets prepared into the cache, or one exported as an image folder."""
from __future__ import annotations

import logging
from pathlib import Path

from bench import command
from bench.request import Request
from bench.spec.task import SpecError, get_task

log = logging.getLogger("bench")


def export_images(args: Request) -> int:
    """`bench data export-images --task T [--format png|jpeg] DIR|s3://BUCKET/PREFIX`: the task's dataset as an
    image folder, on disk or uploaded to object storage (the AWS environment names endpoint and credentials)."""
    import tempfile

    from bench.worker import data, imagefolder, s3

    target = args.tasks[1]
    remote = target.startswith("s3://")
    if remote and s3.holds_objects(target):
        raise SpecError(f"{target} already holds objects: export under a new prefix")
    if not remote and Path(target).exists() and any(Path(target).iterdir()):
        raise SpecError(f"{target} is not empty: export into a new folder")
    task = get_task(args.task, data_dir=args.data_dir)
    folder = data.prepare(task)
    if folder is None:
        raise SpecError(f"task {task.name} is synthetic: it has no images to export")
    with tempfile.TemporaryDirectory(prefix="dtbench-export-") as scratch:
        written = imagefolder.export(data.load(folder), Path(scratch) if remote else Path(target), args.format)
        if remote:
            s3.upload(Path(scratch), target)
    log.info("wrote %s images to %s/train and %s to %s/test (%s): read them back with %s", f"{written['train']:,}",
             target, f"{written['test']:,}", target, args.format,
             f"--input s3 --data-url {target}" if remote else f"--dataset imagefolder --data-dir {target}")
    return 0


def cmd_data(args: Request) -> int:
    from bench.worker import data

    if args.tasks[:1] == ["export-images"]:
        return export_images(args)

    if args.download:
        log.info("downloaded to %s", data.download_fashion_mnist())
    elif args.install and not data.install_fashion_mnist():
        log.warning("could not install Debian's dataset-fashion-mnist (needs apt-get and root or sudo): "
                    f"the default task will need --data-dir or `{command()} data --download`")
    failed = 0
    for name in args.tasks:
        try:
            folder = data.prepare(get_task(name, data_dir=args.data_dir))
        except SpecError as exc:  # one missing dataset must not stop the others
            log.warning("task %s: %s", name, exc)
            failed += 1
            continue
        log.info("task %s: %s", name, folder or "synthetic (made on the device, nothing cached)")
    return 2 if failed and not args.install else 0
