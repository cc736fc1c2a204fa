"""Object storage over S3's API (AWS, MinIO, Ceph, moto...) through boto3, for listing, checking and uploading.

Where and as whom come from the standard AWS configuration alone: `AWS_ENDPOINT_URL` (or
`AWS_ENDPOINT_URL_S3`) for a server that is not AWS, `AWS_REGION`, and the credential chain (environment,
~/.aws/credentials, a profile). Nothing of it is ever written into a spec, a row, a log or a command line:
a run names only its `s3://bucket/prefix`.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.spec.task import SpecError

ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# Fail within seconds, not boto3's minutes of retries: a bad endpoint is a one-line error before a run starts.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, ATTEMPTS = 5, 30, 3


def split_url(url: str) -> tuple[str, str]:
    """s3://bucket/some/prefix -> ("bucket", "some/prefix/") (the prefix "" or ending in "/")."""
    if not url.startswith("s3://") or len(url) <= len("s3://"):
        raise SpecError(f"{url!r} is not an S3 URL: write s3://BUCKET/PREFIX")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    prefix = prefix.strip("/")
    return bucket, prefix + "/" if prefix else ""


def endpoint() -> str | None:
    """The S3 endpoint the AWS configuration names, when it is not AWS's own (None: AWS)."""
    return next((os.environ[name] for name in ENDPOINT_ENVS if os.environ.get(name)), None)


def endpoint_label() -> str:
    """The endpoint as a row records it: scheme, host and port, never a user:password part."""
    from urllib.parse import urlsplit

    url = endpoint()
    if not url:
        return f"AWS S3 ({region()})"
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def region() -> str:
    import boto3

    return boto3.session.Session().region_name or "us-east-1"


def client():
    """A boto3 S3 client on the standard configuration, with short timeouts and path-style addressing
    for a custom endpoint (MinIO and moto serve buckets as paths, not host names)."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                    retries={"max_attempts": ATTEMPTS, "mode": "standard"},
                    s3={"addressing_style": "path"} if endpoint() else None, max_pool_connections=32)
    return boto3.client("s3", config=config)


def describe_error(exc: BaseException, url: str) -> str:
    """What went wrong reaching `url`, in one line that names the fix (never the credentials)."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    where = endpoint() or "AWS"
    if isinstance(exc, NoCredentialsError):
        return f"no AWS credentials for {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
    if isinstance(exc, EndpointConnectionError):
        return f"cannot reach the S3 endpoint {where} for {url}: start the server, or fix AWS_ENDPOINT_URL"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchBucket", "404"):
            return f"bucket of {url} does not exist on {where}: create it, or fix --data-url"
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken"):
            return (f"{where} refused the credentials for {url} ({code}): fix AWS_ACCESS_KEY_ID / "
                    "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)")
        return f"S3 error {code} on {url} ({where}): {exc.response.get('Error', {}).get('Message', '')}"
    return f"cannot read {url} from {where}: {type(exc).__name__}: {exc}"


def list_keys(url: str) -> list[str]:
    """Every object key under the URL's prefix, relative to it; a failure is one line naming the fix."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_url(url)
    try:
        pages = client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [item["Key"][len(prefix):] for page in pages for item in page.get("Contents", [])]
    except (BotoCoreError, ClientError) as exc:
        raise SpecError(describe_error(exc, url)) from None


def holds_objects(url: str) -> bool:
    """Whether anything is stored under the URL's prefix (a bucket that does not exist holds nothing)."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_url(url)
    try:
        return client().list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount", 0) > 0
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return False
        raise SpecError(describe_error(exc, url)) from None
    except BotoCoreError as exc:
        raise SpecError(describe_error(exc, url)) from None


def read_object(url: str, key: str, s3=None) -> bytes:
    """One object's bytes: `key` relative to the URL's prefix; a failure is one line naming the fix (the server
    may go away between the listing and the read)."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_url(url)
    try:
        return (s3 or client()).get_object(Bucket=bucket, Key=prefix + key)["Body"].read()
    except (BotoCoreError, ClientError) as exc:
        raise SpecError(describe_error(exc, f"{url.rstrip('/')}/{key}")) from None


def upload(directory: Path, url: str, threads: int = 16) -> int:
    """Copy a folder's files under the URL's prefix (the bucket made if missing); return how many."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_url(url)
    s3 = client()
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    try:
        try:
            s3.head_bucket(Bucket=bucket)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
                raise
            where = region()  # us-east-1 is the one region S3 refuses to be told
            s3.create_bucket(Bucket=bucket, **({} if where == "us-east-1" else
                                               {"CreateBucketConfiguration": {"LocationConstraint": where}}))
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda f: s3.upload_file(str(f), bucket, prefix + f.relative_to(directory).as_posix()),
                          files))
    except (BotoCoreError, ClientError, Boto3Error) as exc:
        raise SpecError(describe_error(getattr(exc, "__cause__", None) or exc, url)) from None
    return len(files)
