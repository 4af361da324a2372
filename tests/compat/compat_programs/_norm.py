"""The training graphs the normalization programs build: forward (Y, mean, inv_variance) and
backward (dX, dScale, dBias) of layernorm, instancenorm or adalayernorm."""

from compat_programs import _graph


def forward(h, op, name, ins, outs, io="HALF", y_type=None):
    """The training forward of g.<op> on ins = (x, scale, bias, epsilon) writing outs = (y,
    mean, inv_var): Y in y_type (io by default), the statistics fp32. Executes once; returns a
    function that executes again."""
    cudnn = h.cudnn
    g = _graph.graph(h, io)
    X, S, B, E = (g.tensor_like(t) for t in ins)
    Y, mean, inv_var = getattr(g, op)(name=name,
                                      norm_forward_phase=cudnn.norm_forward_phase.TRAINING,
                                      input=X, scale=S, bias=B, epsilon=E)
    Y.set_output(True).set_data_type(getattr(cudnn.data_type, y_type or io))
    mean.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    inv_var.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    return _graph.finish(h, g, dict(zip((X, S, B, E, Y, mean, inv_var), list(ins) + list(outs))))


def backward(h, op, name, ins, outs, io="HALF"):
    """g.<op>_backward on ins = (dy, x, scale, mean, inv_var) writing outs = (dx in io, dscale and
    dbias fp32). Executes once; returns a function that executes again."""
    cudnn = h.cudnn
    g = _graph.graph(h, io)
    DY, X, S, M, IV = (g.tensor_like(t) for t in ins)
    DX, DS, DB = getattr(g, op + "_backward")(name=name, grad=DY, input=X, scale=S, mean=M,
                                              inv_variance=IV)
    DX.set_output(True).set_data_type(getattr(cudnn.data_type, io))
    DS.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    DB.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    return _graph.finish(h, g, dict(zip((DY, X, S, M, IV, DX, DS, DB), list(ins) + list(outs))))
