"""Messages of the trainer <-> coordinator protocol (proto/fulcrum/v1/coordinator.proto).

`coordinator_pb2.py` here is generated from the .proto by `fulcrum.stubs` (at install time by
setup.py, or by `python3 -m fulcrum.stubs` in a source checkout) and never edited by hand; it is
git-ignored. The package path matches the proto package, so generated imports resolve.
"""
