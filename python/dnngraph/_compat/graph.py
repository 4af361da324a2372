"""pygraph: the frontend-compatible graph class."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from .. import _interop
from .._dnngraph import DeviceProperties, Handle, Tensor, build_plan_policy, data_type, heur_mode
from .._dnngraph import create_deviceless_handle
from .._dnngraph import pygraph as _native
from ..datatypes import _library_type
from .convert import _Ptr, _is_array, _on_cpu, _sm_count
from .enums import (
    EngineKnob,
    _knob_from_name,
    _knob_name,
    behavior_note,
    cuda_graph_retention,
    numerical_note,
)
from .errors import _missing
from .nodes import GraphContext, Node, _Shape, _graph_address, _note_key, _notes, _numel
from .tensor import _index_tensor_4d


class SelectedEngine:
    """pygraph.selected_engine for a plan cuDNN's backend does not serve: its ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"SelectedEngine({self.name!r})"


class pygraph(_native):
    """A graph of tensors and operations (the frontend's ``cudnn.pygraph``) with its build
    pipeline: validate -> build_operation_graph -> create_execution_plans -> check_support ->
    build_plans -> execute. Handles from ``create_handle(device="cpu")`` run it on the CPU
    reference engine."""

    def __init__(self, name: Any = "test_graph", io_data_type: Any = None,
                 intermediate_data_type: Any = None, compute_data_type: Any = None,
                 handle: Any = None, sm_count: Any = None, sm_version: Any = None,
                 kernel_cache: Any = None, device_property: Any = None,
                 is_dynamic_shape_enabled: bool = False, is_override_shape_enabled: bool = False,
                 cuda_graph_retention: Any = None, *, is_cuda_graph_replay_expected: bool = False,
                 **kwargs: Any) -> None:
        if isinstance(name, Handle):  # dnngraph's own order: pygraph(handle, name, ...)
            handle, name = name, ("test_graph" if io_data_type is None else io_data_type)
            io_data_type = None
        if kwargs:
            raise TypeError(f"pygraph(): unexpected keyword arguments {sorted(kwargs)}")
        if device_property is not None:  # deviceless: plans for that GPU, runs nowhere here
            if handle is not None:
                raise ValueError("pygraph(): pass handle= or device_property=, not both "
                                 "(device_property= builds without a device)")
            if not isinstance(device_property, DeviceProperties):
                raise TypeError("pygraph(device_property=...): expected the DeviceProperties of "
                                "create_device_properties(), got "
                                f"{type(device_property).__name__}")
            handle = create_deviceless_handle(device_property)
        native_kw: Dict[str, Any] = {"name": name or "",
                                     "is_dynamic_shape_enabled": is_dynamic_shape_enabled}
        if sm_count is not None:
            native_kw["sm_count"] = _sm_count(sm_count)
        for k, v in (("io_data_type", io_data_type),
                     ("intermediate_data_type", intermediate_data_type),
                     ("compute_data_type", compute_data_type)):
            if v is not None:
                native_kw[k] = _library_type(v)
        if handle is not None:
            native_kw["handle"] = handle
        if kernel_cache is not None:
            native_kw["kernel_cache"] = kernel_cache
        super().__init__(**native_kw)
        self.allow_unused_tensors = True  # the frontend ignores tensors no op uses
        self._frontend_forms = True  # execute takes the frontend's forms (python/src/execute.cpp)
        # The frontend reads sm_version only in its own support checks (the compute capability
        # its SDPA lowering assumes, else the device's); dnngraph plans for the handle's GPU (or
        # a deviceless handle's target), so it is kept for the caller and used for nothing
        # (docs/compatibility.md). sm_count is the native property (the SM count target).
        self.sm_version = sm_version
        self._override_shape_enabled = bool(is_override_shape_enabled)
        self._bindings: Dict[int, Any] = {}  # uid-less: keyed by id(tensor) -> (tensor, data)

    # ---- tensors ----
    def tensor(self, dim: Any = None, stride: Any = None, data_type: Any = None,
               is_virtual: bool = False, is_pass_by_value: bool = False,
               ragged_offset: Any = None, reordering_type: Any = None, name: str = "",
               uid: Any = None, ragged_offset_multiplier: int = 1, alignment_value: int = 1,
               **kwargs: Any) -> Tensor:
        if kwargs:
            raise TypeError(f"tensor(): unexpected keyword arguments {sorted(kwargs)}")
        if dim is None:
            raise TypeError("tensor(): missing the dims (dim=[...])")
        if reordering_type is not None and getattr(reordering_type, "name", "NONE") != "NONE":
            raise _missing(f"tensor(reordering_type={reordering_type!r})")
        kw: Dict[str, Any] = {"name": name, "dim": [int(d) for d in dim],
                              "is_virtual": is_virtual, "is_pass_by_value": is_pass_by_value}
        if stride is not None:
            kw["stride"] = [int(s) for s in stride]
        if data_type is not None:
            kw["data_type"] = _library_type(data_type)
        if uid is not None and uid != -1:
            kw["uid"] = int(uid)
        if ragged_offset is not None:
            kw["ragged_offset"] = _index_tensor_4d(ragged_offset)
        if ragged_offset_multiplier not in (None, 1):
            kw["ragged_offset_multiplier"] = int(ragged_offset_multiplier)
        t = _native.tensor(self, **kw)
        self._track(t)
        return t

    def _track(self, t: Any) -> Any:
        """Remembers graph tensors made through this class (for tensors/find_tensor/...)."""
        made = self.__dict__.setdefault("_made", [])
        for x in (t if isinstance(t, tuple) else (t,)):
            if isinstance(x, Tensor):
                made.append(x)
        return t

    # ---- introspection of the graph's tensors and nodes ----
    @property
    def tensors(self) -> Dict[str, Tensor]:
        """{name: tensor} of the tensors made through this object's methods."""
        return {t.get_name(): t for t in self.__dict__.get("_made", [])}

    def find_tensor(self, name_or_uid: Any) -> Optional[Tensor]:
        for t in self.__dict__.get("_made", []):
            if (t.get_uid() == name_or_uid) if isinstance(name_or_uid, int) else (
                    t.get_name() == name_or_uid):
                return t
        return None

    def get_inputs(self) -> List[Tensor]:
        """Non-virtual tensors no node produces."""
        produced = {o for n in self._json()["nodes"] for o in n["outputs"].values()}
        names = [t["name"] for i, t in enumerate(self._json()["tensors"])
                 if i not in produced and not t["virtual"]]
        return [t for t in (self.find_tensor(n) for n in names) if t is not None]

    def get_outputs(self) -> List[Tensor]:
        return [t for t in self.__dict__.get("_made", []) if t.get_is_output()]

    @property
    def nodes(self) -> List["Node"]:
        doc = self._json()
        names = [t["name"] for t in doc["tensors"]]
        return [Node(n, names) for n in doc["nodes"]]

    def get_node(self, name: str) -> Optional["Node"]:
        return next((n for n in self.nodes if n.name == name), None)

    def inspect(self) -> Dict[str, Any]:
        """The graph's description (its JSON form) as a dict."""
        return self._json()

    @property
    def context(self) -> "GraphContext":
        doc = self._json()
        return GraphContext(*(getattr(data_type, doc[k]) for k in (
            "io_data_type", "intermediate_data_type", "compute_data_type")), name=doc["name"])

    @property
    def plans(self) -> List[dict]:
        """The supported candidate plans, in plan-index order (see candidates())."""
        return self._supported()

    def backend_plan_entries(self) -> List[dict]:
        return self._supported()

    @property
    def selected_engine(self) -> Optional["SelectedEngine"]:
        """As the frontend: None when cuDNN's backend serves the selected plan (the frontend's
        Python engines are the other case; dnngraph has none). On a CPU handle the reference
        engine serves it: an object whose ``name`` is ``"reference"``."""
        i = self.selected_plan_index()
        plans = self._supported()
        if not 0 <= i < len(plans) or str(plans[i].get("engine")) != "reference":
            return None
        return SelectedEngine(str(plans[i]["name"]))

    def tensor_like(self, template: Any = None, name: str = "", is_virtual: bool = False,
                    **kwargs: Any) -> Tensor:
        if template is None:
            template = kwargs.pop("obj", None)
        if kwargs or template is None:
            raise TypeError("tensor_like(template, name='', is_virtual=False)")
        if isinstance(template, Tensor):  # the copy form: same dims, strides, type
            return self.tensor(dim=template.get_dim(), stride=template.get_stride(),
                               data_type=template.get_data_type(), is_virtual=is_virtual,
                               is_pass_by_value=template.get_is_pass_by_value(), name=name)
        dim, stride, dt = _interop.describe(template)
        if not dim:  # a 0-d array: one element
            dim, stride = [1], [1]
        # The frontend makes host tensors pass-by-value; on a CPU handle that only matters for
        # single values (a bigger host array is ordinary data there).
        pbv = _on_cpu(template) and (self._device() != "cpu" or _numel(dim) == 1)
        return self.tensor(dim=dim, stride=stride, data_type=dt, is_virtual=is_virtual,
                           is_pass_by_value=pbv, name=name)

    def tensor_scalar(self, value: Any, scalar_type: Any = None, name: str = "") -> Tensor:
        """A pass-by-value scalar holding `value` (bound automatically at execute)."""
        if isinstance(value, bool) or isinstance(value, int):
            dt = data_type.INT64 if not isinstance(value, bool) else data_type.BOOLEAN
        elif isinstance(value, float):
            dt = data_type.FLOAT
        elif _is_array(value):
            t = self.tensor_like(value, name=name)
            t.set_is_pass_by_value(True)
            self._bind(t, value)
            return t
        else:
            raise TypeError(f"tensor_scalar: expected a number or a one-element array, got "
                            f"{type(value).__name__}")
        t = self.tensor(dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt,
                        is_pass_by_value=True, name=name)
        self._bind(t, value)
        return t

    def _bind(self, t: Tensor, data: Any) -> None:
        self._bindings[id(t)] = (t, data)

    def _device(self) -> str:
        h = _native.handle.__get__(self)
        return "cuda" if h is None else str(h.device)

    def _ensure_tensor(self, v: Any, name: str) -> Any:
        if not _is_array(v):
            return v
        t = self.tensor_like(v, name=name)
        self._bind(t, v)
        return t

    # ---- pipeline ----
    def _raise_deferred(self) -> None:
        deferred = self.__dict__.get("_deferred")
        if deferred:
            raise deferred[0]

    def validate(self) -> None:
        self._raise_deferred()
        _native.validate(self)

    def build_operation_graph(self, *args: Any, **kwargs: Any) -> None:
        self._raise_deferred()
        _native.build_operation_graph(self, *args, **kwargs)
        self._plans_created = self._support_checked = False

    def build(self, heuristics: Any = None, ctx: Any = None, *, heur_modes: Any = None,
              policy: Any = None) -> None:
        """All pipeline steps; with no arguments heuristics [A, FALLBACK]."""
        self._raise_deferred()
        modes = heuristics if heuristics is not None else heur_modes
        if modes is None:
            modes = [heur_mode.A, heur_mode.FALLBACK]
        if not isinstance(modes, (list, tuple)):
            modes = [modes]
        _native.build(self, list(modes), policy or build_plan_policy.HEURISTICS_CHOICE)
        self._plans_created = self._support_checked = True

    def create_execution_plans(self, heuristics: Any = None, *, heur_modes: Any = None) -> None:
        modes = heuristics if heuristics is not None else heur_modes
        if modes is None:
            modes = [heur_mode.A, heur_mode.FALLBACK]
        if not isinstance(modes, (list, tuple)):
            modes = [modes]
        _native.create_execution_plans(self, list(modes))
        self._plans_created = True
        self._support_checked = False

    def check_support(self) -> None:
        if not self.__dict__.get("_plans_created"):
            self.create_execution_plans()  # the frontend proposes plans itself when not asked
        _native.check_support(self)
        self._support_checked = True

    def _ensure_checked(self) -> None:
        """The frontend builds plans without an explicit check_support() (it checks the
        candidates as it builds): run the missing steps first."""
        if not self.__dict__.get("_support_checked"):
            self.check_support()

    def build_plans(self, policy: Any = None, *args: Any, ctx: Any = None, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError("build_plans(policy=build_plan_policy.HEURISTICS_CHOICE)")
        self._ensure_checked()
        _native.build_plans(self, policy or build_plan_policy.HEURISTICS_CHOICE)

    def build_plan_at_index(self, index: int) -> "pygraph":
        self._ensure_checked()
        _native.build_plan_at_index(self, index)
        return self

    def select_plan(self, index: int) -> "pygraph":
        self._ensure_checked()
        _native.select_plan(self, index)
        return self

    # ---- plan filters: the native graph applies them as candidates are checked and built ----
    def deselect_workspace_greater_than(self, workspace_limit: int) -> "pygraph":
        """Skips plans needing more than workspace_limit bytes."""
        return _native.deselect_workspace_greater_than(self, int(workspace_limit))

    def deselect_engines(self, engine_names: List[str]) -> "pygraph":
        """Skips plans whose name, engine id ("eng0") or engine is listed."""
        return _native.deselect_engines(self, [str(n) for n in engine_names])

    def select_numeric_notes(self, notes: List[Any]) -> "pygraph":
        """Keeps only plans carrying every listed numerical note."""
        return _native.select_numeric_notes(self, [_note_key(n) for n in notes])

    def deselect_numeric_notes(self, notes: List[Any]) -> "pygraph":
        """Skips plans carrying any listed numerical note."""
        return _native.deselect_numeric_notes(self, [_note_key(n) for n in notes])

    def select_behavior_notes(self, notes: List[Any]) -> "pygraph":
        """Keeps only plans carrying every listed behaviour note."""
        return _native.select_behavior_notes(self, [_note_key(n) for n in notes])

    def deselect_behavior_notes(self, notes: List[Any]) -> "pygraph":
        """Skips plans carrying any listed behaviour note."""
        return _native.deselect_behavior_notes(self, [_note_key(n) for n in notes])

    # ---- autotuning and CUDA graphs (the frontend's signatures) ----
    def autotune(self, handle: Any = None, variant_pack: Any = None, workspace: Any = None,
                 user_impl: Any = None, **options: Any) -> dict:
        """Times every plan the filters allow on variant_pack and selects the fastest (the
        frontend's ``autotune(handle, variant_pack, workspace)``). Without a variant pack,
        dnngraph allocates the buffers itself. Keyword options: budget_ms, warmup, iterations,
        flush_cache, rotate_inputs, rotate_budget_bytes, use_cache, progress. Returns the
        report dict of the native ``autotune``."""
        if user_impl is not None:
            raise _missing("autotune(user_impl=...)", "dnngraph times the plans itself")
        if variant_pack is not None:
            variant_pack = self._pack(variant_pack, None)
            if workspace is None:
                workspace = self._own_workspace(_native.get_autotune_workspace_size(self))
        return _native.autotune(self, handle, variant_pack, workspace, **options)

    def populate_cuda_graph(self, handle: Any, variant_pack: Any, workspace: Any,
                            cuda_graph: Any) -> None:
        """Records the selected plan into ``cuda_graph`` (an empty cudaGraph_t as an int)."""
        _native.populate_cuda_graph(self, handle, self._pack(variant_pack, None), workspace,
                                    _graph_address(cuda_graph))

    def update_cuda_graph(self, handle: Any, variant_pack: Any, workspace: Any,
                          cuda_graph: Any) -> None:
        """Points a graph filled by populate_cuda_graph at new pointers."""
        _native.update_cuda_graph(self, handle, self._pack(variant_pack, None), workspace,
                                  _graph_address(cuda_graph))

    def get_workspace_size(self, handle: Any = None, override_uids: Any = None,
                           override_shapes: Any = None, override_strides: Any = None) -> int:
        self._no_overrides("get_workspace_size", override_uids, override_shapes,
                           override_strides)
        return _native.get_workspace_size(self)

    def get_workspace_size_plan_at_index(self, index: int, handle: Any = None,
                                         override_uids: Any = None, override_shapes: Any = None,
                                         override_strides: Any = None) -> int:
        self._no_overrides("get_workspace_size_plan_at_index", override_uids, override_shapes,
                           override_strides)
        return _native.get_workspace_size_plan_at_index(self, index)

    def is_override_shape_enabled(self) -> bool:
        return self._override_shape_enabled

    def _no_overrides(self, op: str, uids: Any, shapes: Any, strides: Any) -> None:
        if uids or shapes or strides:
            raise _missing(f"{op}(override_uids/override_shapes/override_strides)",
                           "build one graph per shape (dynamic-shape overrides are not "
                           "implemented)")

    # ---- plans and notes ----
    def _candidates(self) -> List[dict]:
        """The candidate plans; right after create_execution_plans (before check_support) the
        frontend already has its engine configs, so the candidates are checked here first."""
        cands = _native.candidates(self)
        if not cands and self.__dict__.get("_plans_created"):
            self.check_support()
            cands = _native.candidates(self)
        return cands

    def _supported(self) -> List[dict]:
        return [c for c in self._candidates() if c["supported"]]

    def get_execution_plan_count(self) -> int:
        """The number of supported plans (known once create_execution_plans has run)."""
        return len(self._supported())

    def _plan(self, index: int) -> dict:
        plans = self._supported()
        if not 0 <= index < len(plans):
            raise IndexError(f"plan index {index} out of range: the graph has {len(plans)} "
                             "supported plans (get_execution_plan_count())")
        return plans[index]

    # ---- engines by index and their knobs ----
    def get_knobs_for_engine(self, engine: int) -> List["EngineKnob"]:
        """The knobs of engine `engine` (0 <= engine < get_engine_count()): objects with `type`
        (a knob_type; the cuDNN name as a str where the frontend has no member), `min_value`,
        `max_value` and `stride`. NotSupportedError when that engine cannot run the graph."""
        return [EngineKnob(_knob_from_name(k["name"]), k["min_value"], k["max_value"],
                           k["stride"]) for k in super().get_knobs_for_engine(int(engine))]

    def create_execution_plan(self, engine_id: int, knobs: Any = None) -> "pygraph":
        """Appends the plan of engine `engine_id` with `knobs` ({knob_type or cuDNN knob name:
        value}; unset knobs keep the engine's defaults) to the candidates; then check_support()
        and build_plans() as after create_execution_plans(). NotSupportedError when the engine
        refuses the graph or the values."""
        named = {_knob_name(k): int(v) for k, v in dict(knobs or {}).items()}
        super().create_execution_plan(int(engine_id), named)
        return self

    def get_engine_and_knobs_at_index(self, index: int) -> Tuple[int, Dict[Any, int]]:
        """(engine id, {knob_type: value}) of the plan at `index`: what create_execution_plan
        takes to make the same plan again."""
        plan = self._plan(index)
        if int(plan["engine_id"]) < 0:
            raise _missing("get_engine_and_knobs_at_index",
                           "this plan was restored from a serialized graph or plan-cache entry "
                           "that predates engine ids; build the graph again")
        return int(plan["engine_id"]), {_knob_from_name(k): int(v)
                                        for k, v in plan["knobs"].items()}

    def get_plan_name_at_index(self, index: int) -> str:
        return str(self._plan(index)["name"])

    def get_behavior_notes_for_plan_at_index(self, index: int) -> List[Any]:
        return _notes(self._plan(index)["behavior_notes"], behavior_note)

    def get_numerical_notes_for_plan_at_index(self, index: int) -> List[Any]:
        return _notes(self._plan(index)["numerical_notes"], numerical_note)

    def get_behavior_notes(self) -> List[Any]:
        return self.get_behavior_notes_for_plan_at_index(max(self.selected_plan_index(), 0))

    def get_numerical_notes(self) -> List[Any]:
        return self.get_numerical_notes_for_plan_at_index(max(self.selected_plan_index(), 0))

    # ---- introspection ----
    def key(self, *args: Any, **kwargs: Any) -> int:
        """The graph's fingerprint as an int (the frontend's key() type)."""
        return int(_native.key(self), 16)

    def _json(self) -> dict:
        return json.loads(_native.to_json(self))

    def _variant_pack_uids(self) -> List[int]:
        """The frontend's name for _get_variant_pack_uids_sorted()."""
        return self._get_variant_pack_uids_sorted()

    def _get_variant_pack_uids_sorted(self) -> List[int]:
        """Uids of the tensors execute() needs (non-virtual), ascending."""
        _native.validate(self)
        return sorted(t["uid"] for t in self._json()["tensors"] if not t["virtual"])

    def query_tensor_attributes_of_uid(self, uid: int) -> Any:
        """The graph tensor with this uid (its JSON description when it was not made through this
        object)."""
        t = self.find_tensor(int(uid))
        if t is not None:
            return t
        for t in self._json()["tensors"]:
            if t["uid"] == uid:
                return t
        raise ValueError(f"query_tensor_attributes_of_uid: the graph has no tensor with uid {uid}")

    def get_cuda_graph_retention(self) -> Any:
        return cuda_graph_retention.NONE

    # ---- serialization ----
    def serialize(self, *, as_bytes: bool = False, include_kernels: bool = True) -> bytes:
        """The built graph as bytes (deserialize also takes the frontend's list of byte values)."""
        return _native.serialize(self)

    def deserialize(self, *args: Any, **kwargs: Any) -> None:
        handle = kwargs.pop("handle_", kwargs.pop("handle", None))
        data = kwargs.pop("data", kwargs.pop("blob", None))
        kwargs.pop("enforce_precompiled", None)
        if kwargs:
            raise TypeError(f"deserialize(): unexpected keyword arguments {sorted(kwargs)}")
        rest = list(args)
        if rest and isinstance(rest[0], Handle):
            handle = rest.pop(0)
        if rest:
            data = rest.pop(0)
        if isinstance(data, str):
            raise _missing("deserialize(JSON string)", "pass the bytes from serialize()")
        if data is None:
            raise TypeError("deserialize([handle,] data): missing the serialized data")
        blob = bytes(data)
        if handle is None:
            _native.deserialize(self, blob)
        else:
            _native.deserialize(self, handle, blob)
        self._plans_created = self._support_checked = True

    # ---- execution ----
    def _pack(self, tensor_dict: Any, tensor_uids: Any) -> Dict[Any, Any]:
        if tensor_uids is not None:
            if len(tensor_uids) != len(tensor_dict):
                raise ValueError(f"execute: {len(tensor_uids)} tensor_uids for "
                                 f"{len(tensor_dict)} buffers")
            if len(set(tensor_uids)) != len(tensor_uids):
                raise ValueError("execute: tensor_uids has duplicates")
            tensor_dict = dict(zip((int(u) for u in tensor_uids), tensor_dict))
        pack: Dict[Any, Any] = {}
        names: Optional[Dict[str, int]] = None
        for t, data in self._bindings.values():
            pack[t] = data
        for k, v in tensor_dict.items():
            if v is None or k is None:  # the frontend skips optional tensors left as None
                continue
            if isinstance(k, str):
                if names is None:
                    names = {t["name"]: t["uid"] for t in self._json()["tensors"]}
                if k not in names:
                    raise KeyError(f"execute: the graph has no tensor named {k!r}")
                k = names[k]
            pack[k] = v  # (an int: a value or a raw address, told apart by the native execute)
        return pack

    # execute() is the native method (python/src/execute.cpp): it takes every form above on one
    # path into C++ and calls back into Python only for _no_overrides' error, build() on a graph
    # not built yet, _own_workspace when no workspace is given and the plan needs one, and _pack
    # for tensor_uids lists, name keys, non-dict mappings and scalars bound by tensor_scalar().
    def _own_workspace(self, size: int) -> Any:
        """A workspace the graph keeps, for execute(workspace=None) on a plan that needs one."""
        if size <= 0:
            return None
        ws = self.__dict__.get("_workspace")
        if ws is None or _numel(list(getattr(ws, "shape", [0]))) < size:
            if self._device() == "cpu":
                import numpy as np

                ws = np.empty(size, dtype=np.uint8)
            else:
                import torch

                ws = torch.empty(size, dtype=torch.uint8, device=self._device())
            self._workspace = ws
        return ws

    def execute_plan_at_index(self, tensor_dict: Any, workspace: Any = None, index: int = 0,
                              handle: Any = None, *args: Any, tensor_uids: Any = None,
                              **kwargs: Any) -> None:
        if workspace is None:
            workspace = self._own_workspace(_native.get_workspace_size_plan_at_index(self, index))
        _native.execute_plan_at_index(self, self._pack(tensor_dict, tensor_uids), workspace,
                                      index, handle)

    def _execute_with_ptrs(self, tensor_to_ptr_map: Dict[Any, int], workspace: int = 0,
                           handle: Any = None, *args: Any, **kwargs: Any) -> None:
        """execute() with raw pointers: {uid or tensor: address}, workspace address."""
        cuda = self._device() != "cpu"
        by_uid = {t["uid"]: t for t in self._json()["tensors"]}
        pack: Dict[Any, Any] = {}
        for k, ptr in tensor_to_ptr_map.items():
            uid = k.get_uid() if isinstance(k, Tensor) else int(k)
            if uid not in by_uid:
                raise KeyError(f"_execute_with_ptrs: the graph has no tensor with uid {uid}")
            pack[uid] = _Ptr(int(ptr), _Shape(by_uid[uid]), cuda)
        ws_size = _native.get_workspace_size(self)
        ws = None
        if ws_size > 0:
            ws = _Ptr(int(workspace), _Shape({"dim": [ws_size], "stride": [1],
                                              "data_type": "UINT8"}), cuda)
        _native.execute(self, pack, ws, handle)
