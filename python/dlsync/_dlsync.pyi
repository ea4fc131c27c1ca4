# Types of the dlsync extension module; the package dlsync re-exports them.
from typing import Iterable, Optional, Protocol, Tuple, Union

class _CudaStreamProtocol(Protocol):
    def __cuda_stream__(self) -> Tuple[int, int]: ...

class _TorchStream(Protocol):
    @property
    def cuda_stream(self) -> int: ...

class _CuPyStream(Protocol):
    @property
    def ptr(self) -> int: ...

Device = Tuple[int, int]
"""(device_type, device_id), as __dlpack_device__() returns it."""

StreamObject = Union[None, int, _CudaStreamProtocol, _TorchStream, _CuPyStream]
"""A stream: None (default stream, or none), an int handle, or a stream object."""

__version__: str
CAPTURE_STRICT: int
CAPTURE_NONE_IS_NO_SYNC: int
STREAM_LEGACY: int
STREAM_PER_THREAD: int

# Exchange: ordering the producer's stream before the consumer's.
def export(device: Device, producer_stream: StreamObject, stream: Optional[int]) -> None: ...
def push_dep(device: Device, src: StreamObject, dst: StreamObject) -> None: ...

# Coalesced exchange: one dependency per distinct producer stream.
Producer = Union[StreamObject, Tuple[Device, StreamObject]]
def group_wait(device: Device, consumer: StreamObject, producers: Iterable[Producer]) -> None: ...

# The runtime library a built-in backend found: (path, version, major, minor).
def _runtime(name: str) -> Tuple[str, int, int, int]: ...

# Raises the exception of a dlsync status (None for 0).
def _raise_status(status: int) -> None: ...

# The stream= conventions.
def stream_from_arg(device: Device, stream: Optional[int]) -> Tuple[int, bool]: ...
def stream_to_arg(device: Device, stream: StreamObject) -> Optional[int]: ...

# Graph-capture policy.
def set_capture_policy(policy: int) -> None: ...
def get_capture_policy() -> int: ...

# The simulated device primitives behind dlsync.testing.
from typing import Any
_sim: Any
