from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_PHASE_UNSPECIFIED: _ClassVar[TaskPhase]
    TASK_PHASE_ACCEPTED: _ClassVar[TaskPhase]
    TASK_PHASE_BOUND: _ClassVar[TaskPhase]
    TASK_PHASE_RUNNING: _ClassVar[TaskPhase]
    TASK_PHASE_SUCCEEDED: _ClassVar[TaskPhase]
    TASK_PHASE_FAILED: _ClassVar[TaskPhase]
    TASK_PHASE_UNSCHEDULABLE: _ClassVar[TaskPhase]
    TASK_PHASE_CANCELLED: _ClassVar[TaskPhase]
TASK_PHASE_UNSPECIFIED: TaskPhase
TASK_PHASE_ACCEPTED: TaskPhase
TASK_PHASE_BOUND: TaskPhase
TASK_PHASE_RUNNING: TaskPhase
TASK_PHASE_SUCCEEDED: TaskPhase
TASK_PHASE_FAILED: TaskPhase
TASK_PHASE_UNSCHEDULABLE: TaskPhase
TASK_PHASE_CANCELLED: TaskPhase

class EnrollRequest(_message.Message):
    __slots__ = ("cluster", "token", "csr", "agent_version", "credential")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CSR_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    token: str
    csr: bytes
    agent_version: str
    credential: str
    def __init__(self, cluster: _Optional[str] = ..., token: _Optional[str] = ..., csr: _Optional[bytes] = ..., agent_version: _Optional[str] = ..., credential: _Optional[str] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("csr",)
    CSR_FIELD_NUMBER: _ClassVar[int]
    csr: bytes
    def __init__(self, csr: _Optional[bytes] = ...) -> None: ...

class CertificateResponse(_message.Message):
    __slots__ = ("cluster", "certificate", "ca_cert", "issued_unix_ms", "expires_unix_ms")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    CA_CERT_FIELD_NUMBER: _ClassVar[int]
    ISSUED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    certificate: bytes
    ca_cert: bytes
    issued_unix_ms: int
    expires_unix_ms: int
    def __init__(self, cluster: _Optional[str] = ..., certificate: _Optional[bytes] = ..., ca_cert: _Optional[bytes] = ..., issued_unix_ms: _Optional[int] = ..., expires_unix_ms: _Optional[int] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("cluster", "token", "agent_version")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    token: str
    agent_version: str
    def __init__(self, cluster: _Optional[str] = ..., token: _Optional[str] = ..., agent_version: _Optional[str] = ...) -> None: ...

class RegisterResponse(_message.Message):
    __slots__ = ("cluster", "credential")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    credential: str
    def __init__(self, cluster: _Optional[str] = ..., credential: _Optional[str] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("cpu_milli", "memory_mib", "pods")
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    cpu_milli: int
    memory_mib: int
    pods: int
    def __init__(self, cpu_milli: _Optional[int] = ..., memory_mib: _Optional[int] = ..., pods: _Optional[int] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("id", "model", "memory_mib", "free_milli", "free_memory_mib")
    ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    FREE_MILLI_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    id: str
    model: str
    memory_mib: int
    free_milli: int
    free_memory_mib: int
    def __init__(self, id: _Optional[str] = ..., model: _Optional[str] = ..., memory_mib: _Optional[int] = ..., free_milli: _Optional[int] = ..., free_memory_mib: _Optional[int] = ...) -> None: ...

class DeviceColumns(_message.Message):
    __slots__ = ("model", "memory_mib", "free_milli", "free_memory_mib")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    FREE_MILLI_FIELD_NUMBER: _ClassVar[int]
    FREE_MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    model: str
    memory_mib: int
    free_milli: _containers.RepeatedScalarFieldContainer[int]
    free_memory_mib: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, model: _Optional[str] = ..., memory_mib: _Optional[int] = ..., free_milli: _Optional[_Iterable[int]] = ..., free_memory_mib: _Optional[_Iterable[int]] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "labels", "allocatable", "free", "devices", "unschedulable", "device_columns", "label_set")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    LABEL_SET_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    allocatable: Resources
    free: Resources
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    unschedulable: bool
    device_columns: DeviceColumns
    label_set: int
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., allocatable: _Optional[_Union[Resources, _Mapping]] = ..., free: _Optional[_Union[Resources, _Mapping]] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., unschedulable: _Optional[bool] = ..., device_columns: _Optional[_Union[DeviceColumns, _Mapping]] = ..., label_set: _Optional[int] = ...) -> None: ...

class LabelSet(_message.Message):
    __slots__ = ("labels",)
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    def __init__(self, labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TaskReport(_message.Message):
    __slots__ = ("task_id", "generation", "phase", "node", "reason", "at_unix_ms")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    generation: int
    phase: TaskPhase
    node: str
    reason: str
    at_unix_ms: int
    def __init__(self, task_id: _Optional[str] = ..., generation: _Optional[int] = ..., phase: _Optional[_Union[TaskPhase, str]] = ..., node: _Optional[str] = ..., reason: _Optional[str] = ..., at_unix_ms: _Optional[int] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("agent_version", "backend", "cluster_labels", "features")
    class ClusterLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_LABELS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    agent_version: str
    backend: str
    cluster_labels: _containers.ScalarMap[str, str]
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, agent_version: _Optional[str] = ..., backend: _Optional[str] = ..., cluster_labels: _Optional[_Mapping[str, str]] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...

class Inventory(_message.Message):
    __slots__ = ("seq", "nodes", "tasks", "label_sets")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    LABEL_SETS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskReport]
    label_sets: _containers.RepeatedCompositeFieldContainer[LabelSet]
    def __init__(self, seq: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., tasks: _Optional[_Iterable[_Union[TaskReport, _Mapping]]] = ..., label_sets: _Optional[_Iterable[_Union[LabelSet, _Mapping]]] = ...) -> None: ...

class InventoryDelta(_message.Message):
    __slots__ = ("seq", "upserted", "removed", "label_sets")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    UPSERTED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    LABEL_SETS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    upserted: _containers.RepeatedCompositeFieldContainer[Node]
    removed: _containers.RepeatedScalarFieldContainer[str]
    label_sets: _containers.RepeatedCompositeFieldContainer[LabelSet]
    def __init__(self, seq: _Optional[int] = ..., upserted: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., removed: _Optional[_Iterable[str]] = ..., label_sets: _Optional[_Iterable[_Union[LabelSet, _Mapping]]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sent_unix_ms",)
    SENT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    sent_unix_ms: int
    def __init__(self, sent_unix_ms: _Optional[int] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("hello", "inventory", "delta", "heartbeat", "task", "batch")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    inventory: Inventory
    delta: InventoryDelta
    heartbeat: Heartbeat
    task: TaskReport
    batch: AgentBatch
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., inventory: _Optional[_Union[Inventory, _Mapping]] = ..., delta: _Optional[_Union[InventoryDelta, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., task: _Optional[_Union[TaskReport, _Mapping]] = ..., batch: _Optional[_Union[AgentBatch, _Mapping]] = ...) -> None: ...

class AgentBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[AgentMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[AgentMessage, _Mapping]]] = ...) -> None: ...

class TaskWorkload(_message.Message):
    __slots__ = ("image", "command", "cpu_milli", "memory_mib", "gpu_milli", "gpu_memory_mib", "selector", "replicas", "duration_seconds", "priority", "gpu_mem_mib", "failover")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    GPU_MILLI_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_MIB_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_MIB_FIELD_NUMBER: _ClassVar[int]
    FAILOVER_FIELD_NUMBER: _ClassVar[int]
    image: str
    command: _containers.RepeatedScalarFieldContainer[str]
    cpu_milli: int
    memory_mib: int
    gpu_milli: int
    gpu_memory_mib: int
    selector: str
    replicas: int
    duration_seconds: float
    priority: int
    gpu_mem_mib: int
    failover: str
    def __init__(self, image: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., cpu_milli: _Optional[int] = ..., memory_mib: _Optional[int] = ..., gpu_milli: _Optional[int] = ..., gpu_memory_mib: _Optional[int] = ..., selector: _Optional[str] = ..., replicas: _Optional[int] = ..., duration_seconds: _Optional[float] = ..., priority: _Optional[int] = ..., gpu_mem_mib: _Optional[int] = ..., failover: _Optional[str] = ...) -> None: ...

class PlaceTask(_message.Message):
    __slots__ = ("task_id", "generation", "name", "workload")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    generation: int
    name: str
    workload: TaskWorkload
    def __init__(self, task_id: _Optional[str] = ..., generation: _Optional[int] = ..., name: _Optional[str] = ..., workload: _Optional[_Union[TaskWorkload, _Mapping]] = ...) -> None: ...

class CancelTask(_message.Message):
    __slots__ = ("task_id", "generation", "reason", "grace_seconds")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    generation: int
    reason: str
    grace_seconds: int
    def __init__(self, task_id: _Optional[str] = ..., generation: _Optional[int] = ..., reason: _Optional[str] = ..., grace_seconds: _Optional[int] = ...) -> None: ...

class HeartbeatAck(_message.Message):
    __slots__ = ("sent_unix_ms", "lease_seconds")
    SENT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    sent_unix_ms: int
    lease_seconds: float
    def __init__(self, sent_unix_ms: _Optional[int] = ..., lease_seconds: _Optional[float] = ...) -> None: ...

class ResyncRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class HubMessage(_message.Message):
    __slots__ = ("place", "cancel", "resync", "ack", "batch")
    PLACE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    place: PlaceTask
    cancel: CancelTask
    resync: ResyncRequest
    ack: HeartbeatAck
    batch: HubBatch
    def __init__(self, place: _Optional[_Union[PlaceTask, _Mapping]] = ..., cancel: _Optional[_Union[CancelTask, _Mapping]] = ..., resync: _Optional[_Union[ResyncRequest, _Mapping]] = ..., ack: _Optional[_Union[HeartbeatAck, _Mapping]] = ..., batch: _Optional[_Union[HubBatch, _Mapping]] = ...) -> None: ...

class HubBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[HubMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[HubMessage, _Mapping]]] = ...) -> None: ...
