"""tf-ps: ParameterServerStrategy. A chief, one worker per device slot and one parameter server per node, each a
process of its own given its TF_CONFIG; ASYNCHRONOUS updates. The chief's loop is tf_impl/ps_loop.py."""
import os

# Fail a step at once when a worker is gone, instead of gRPC's retries (the harness fails the run). Read by gRPC
# when TensorFlow starts it: set before.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

if __name__ == "__main__":
    from tf_impl import rank

    rank.main("parameter_server")
