"""Plans made by engine and knob instead of heuristics, as an exhaustive search writes them:
get_engine_count(), get_knobs_for_engine(i) (skipping engines that refuse the graph), one
create_execution_plan(i, {KERNEL_CFG: v}) per value (knob-less engines with {}), then
check_support / build_plans / execute of a channels-last half conv + ReLU; and
get_engine_and_knobs_at_index(0) replayed on a second graph names the same plan."""

from compat_harness import Result
from compat_programs import _ref


def _graph(cudnn, h, x, w):
    g = cudnn.pygraph(handle=h.handle, io_data_type=cudnn.data_type.HALF,
                      intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    X, W = g.tensor_like(x), g.tensor_like(w)
    conv = g.conv_fprop(image=X, weight=W, padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    Y = g.relu(input=conv)
    Y.set_output(True)
    g.validate()
    g.build_operation_graph()
    return g, X, W, Y


def run(h):
    cudnn = h.cudnn
    x = h.randn((2, 16, 8, 8), "float16", channels_last=True)
    w = h.randn((16, 16, 3, 3), "float16", channels_last=True, scale=0.25)
    g, X, W, Y = _graph(cudnn, h, x, w)
    made = 0
    for engine in range(g.get_engine_count()):
        try:
            knobs = g.get_knobs_for_engine(engine)
        except (RuntimeError, cudnn.cudnnGraphNotSupportedError):
            continue  # this engine cannot run the graph
        cfgs = [k for k in knobs if k.type == cudnn.knob_type.KERNEL_CFG]
        choices = ([{cudnn.knob_type.KERNEL_CFG: v}
                    for k in cfgs for v in range(k.min_value, k.max_value + 1, k.stride)]
                   if cfgs else ([{}] if not knobs else []))
        for choice in choices[:4]:
            try:
                g.create_execution_plan(engine, choice)
                made += 1
            except (RuntimeError, cudnn.cudnnGraphNotSupportedError):
                continue  # the frontend raises its own (non-RuntimeError) exception
    assert made > 0, "no plan could be made from an engine and knobs"
    g.check_support()
    g.build_plans()
    engine_id, knobs = g.get_engine_and_knobs_at_index(0)
    name = g.get_plan_name_at_index(0)
    y = h.empty(Y.get_dim(), "float16", stride=Y.get_stride())
    ws = h.workspace(g)
    pack = {X: x, W: w, Y: y}
    g.execute(pack, ws)

    again, *_ = _graph(cudnn, h, x, w)
    again.create_execution_plan(engine_id, knobs)
    again.check_support()
    assert again.get_plan_name_at_index(0) == name, (again.get_plan_name_at_index(0), name)
    ref = _ref.conv2d(h.numpy(x), h.numpy(w), (1, 1), (1, 1), (1, 1)).clip(min=0)
    return Result({"Y": y}, {"Y": ref}, 1e-2, lambda: g.execute(pack, ws),
                  notes={"plans": str(made)})
