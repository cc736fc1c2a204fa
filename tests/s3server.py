"""A real S3-compatible server for the tests: moto's standalone server (from PyPI), started on 127.0.0.1 in
a process of its own, with credentials checked (an IAM user with S3 rights; anything else is refused),
and stopped after."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time


class S3Server:
    def __init__(self):
        with socket.socket() as probe:  # a free loopback port for the server to take
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        # The first three requests (making the IAM user, its policy and its key) are unauthenticated;
        # every later one must be signed with that key.
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3", "MOTO_PORT": str(self.port)}
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_until_listening()
        self.key_id, self.secret = self._make_user()

    @classmethod
    def attach(cls, described: dict) -> "S3Server":
        """The server another pytest worker started and `describe`d."""
        server = cls.__new__(cls)
        server.port, server.key_id, server.secret, server.pid = (described[k] for k in ("port", "key_id", "secret",
                                                                                         "pid"))
        server.endpoint, server.process = f"http://127.0.0.1:{server.port}", None
        return server

    def describe(self) -> dict:
        return {"port": self.port, "key_id": self.key_id, "secret": self.secret, "pid": self.process.pid}

    def _wait_until_listening(self, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"moto's server exited with {self.process.returncode}")
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto's server did not listen on 127.0.0.1:{self.port} within {timeout_s} s")

    def _make_user(self) -> tuple[str, str]:
        import boto3

        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="setup",
                           aws_secret_access_key="setup")
        iam.create_user(UserName="dtbench")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="dtbench", PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="dtbench")["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    def env(self, **changes: str) -> dict[str, str]:
        """The standard AWS environment a user sets for this server (changes: e.g. a wrong secret)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.key_id,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, **changes}

    def stop(self) -> None:
        if self.process is None:  # another worker's child: it cannot be waited on from here
            _terminate(self.pid)
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _terminate(pid: int, timeout_s: float = 10) -> None:
    """Stop a process this one did not start: gone, or a zombie its own parent has yet to reap, is stopped."""
    import psutil

    try:
        process = psutil.Process(pid)
        process.terminate()
        deadline = time.monotonic() + timeout_s
        while process.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                process.kill()
                return
            time.sleep(0.05)
    except psutil.NoSuchProcess:
        pass
