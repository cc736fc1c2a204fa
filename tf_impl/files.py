"""Image files as TensorFlow users read them: tf.data over the file list, `tf.io.read_file` (a folder) or
boto3 (an S3 prefix) and `tf.io.decode_image`, mapped in parallel, batched, prefetched.

TensorFlow 2.21 has no S3 file system of its own (it moved to tensorflow-io, whose last release, 0.37.1,
is built for TF 2.16), so objects are fetched with boto3 inside the pipeline (`tf.py_function`); the
decode stays TensorFlow's. The files come in `bench.worker.imagefolder.listing`'s order, the one every
pipeline reads, so a folder `bench data export-images` wrote trains exactly as the in-memory dataset.
"""
from __future__ import annotations

import tensorflow as tf

from bench.spec.rank_spec import RankSpec
from bench.spec.task import TaskSpec
from bench.worker import imagefolder, s3

# The first bytes of every format decode_image reads: a file without them is named before TF's decoder
# fails without a name.
MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM")


def listing(spec: RankSpec) -> imagefolder.Listing:
    return imagefolder.listing(spec.task, spec.images)


def image_loader(task: TaskSpec, root: str):
    """file (a path, or a key under the S3 prefix) -> uint8 HWC image of the task's channels and side."""
    side, channels = task.model.image_size, task.model.channels
    read = _s3_reader(root) if imagefolder.is_remote(root) else tf.io.read_file

    def load(file):
        raw = read(file)
        known = tf.reduce_any([tf.strings.substr(raw, 0, len(m)) == m for m in MAGIC])
        message = "corrupt image, or not a PNG/JPEG/GIF/BMP (tf.io.decode_image reads only those):"
        with tf.control_dependencies([tf.debugging.Assert(known, [message, file])]):
            image = tf.io.decode_image(raw, channels=channels, expand_animations=False)
        image = tf.cond(tf.reduce_all(tf.shape(image)[:2] == [side, side]), lambda: image,
                        lambda: tf.cast(tf.round(tf.image.resize(image, (side, side), antialias=True)), tf.uint8))
        return tf.ensure_shape(image, (side, side, channels))

    return load


def _s3_reader(url: str):
    """key -> its bytes, fetched with one boto3 client (thread-safe, its connections pooled) from every thread
    tf.data maps on."""
    client = s3.client()

    def fetch(key) -> bytes:
        return s3.read_object(url, key.numpy().decode(), client)

    def read(key):
        raw = tf.py_function(fetch, [key], tf.string)
        raw.set_shape(())
        return raw

    return read
