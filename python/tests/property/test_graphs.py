"""Random pointwise/matmul/reduction graphs: valid ones run and match numpy; broken ones
(bad dims, strides, data types, ops on mismatched tensors) raise a dnngraph error at
validate/build/execute, never crash."""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import dnngraph as cudnn

from props import check_error, count_case, prop_settings, ws

HANDLE = cudnn.create_handle(device="cpu")
UNARY = {"relu": lambda x: np.maximum(x, 0), "tanh": np.tanh, "abs": np.abs,
         "neg": np.negative, "exp": np.exp}
BIG = 1e15  # past this (exp of exp ...) float32 rounding of the inputs outgrows the tolerance
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
          "max": np.maximum, "min": np.minimum}


@st.composite
def programs(draw):
    rank = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY) + ["matmul"]),
                                    st.integers(0, 7)), min_size=1, max_size=4))
    return shape, steps


def build_program(shape, steps, rng):
    g = cudnn.pygraph(handle=HANDLE, io_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT)
    x = rng.uniform(-2, 2, shape).astype(np.float32)
    X = g.tensor(name="X", dim=list(shape))
    vals, tens = [x.astype(np.float64)], [X]
    feeds = {X: x}
    for op, pick in steps:
        a, A = vals[pick % len(vals)], tens[pick % len(tens)]
        if op in UNARY:
            T = getattr(g, op if op != "neg" else "neg")(input=A)
            v = UNARY[op](a)
        elif op in BINARY:
            w = rng.uniform(-2, 2, a.shape).astype(np.float32)
            W = g.tensor(name=f"w{len(feeds)}", dim=list(a.shape))
            feeds[W] = w
            T = getattr(g, op)(a=A, b=W)
            v = BINARY[op](a, w.astype(np.float64))
        else:
            if a.ndim < 2:
                continue
            n = a.shape[-1]
            w = rng.uniform(-2, 2, a.shape[:-2] + (n, 2)).astype(np.float32)
            W = g.tensor(name=f"m{len(feeds)}", dim=list(w.shape))
            feeds[W] = w
            T = g.matmul(A=A, B=W, compute_data_type=cudnn.data_type.FLOAT)
            v = a @ w.astype(np.float64)
        vals.append(v)
        tens.append(T)
    comparable = all(np.all(np.abs(v) < BIG) for v in vals)
    return g, feeds, tens[-1], vals[-1], comparable


@prop_settings(6000)
@given(prog=programs(), seed=st.integers(0, 2**32 - 1))
@example(prog=([3], [("exp", 0), ("abs", 0), ("exp", 1), ("exp", 3)]), seed=2)  # exp(exp(...))
def test_valid_graphs_match_numpy(prog, seed):
    count_case()
    rng = np.random.default_rng(seed)
    g, feeds, Y, ref, comparable = build_program(*prog, rng)
    if Y in feeds:
        return
    Y.set_output(True)
    # A valid graph of ops the reference engine runs: an error building it is a failure.
    g.build([cudnn.heur_mode.A])
    y = np.full(ref.shape, np.nan, np.float32)
    g.execute({**feeds, Y: y}, ws(g))
    if not comparable:  # ran without an error; the values are not compared
        return
    np.testing.assert_allclose(y, ref.astype(np.float32), rtol=1e-5, atol=1e-5 * (1 + np.abs(ref).max()))


BAD_INTS = st.one_of(st.integers(-3, 6), st.sampled_from([0, -1, 2**31, 2**62, 2**63 - 1,
                                                          -2**63]))


@prop_settings(6000)
@given(dims=st.lists(BAD_INTS, min_size=0, max_size=5),
       strides=st.one_of(st.none(), st.lists(BAD_INTS, min_size=0, max_size=5)),
       dtype=st.sampled_from(list(cudnn.data_type.__members__.values())),
       op=st.sampled_from(["relu", "add", "matmul", "reduction", "softmax"]),
       execute=st.booleans())
def test_broken_graphs_are_errors(dims, strides, dtype, op, execute):
    count_case()
    g = cudnn.pygraph(handle=HANDLE, io_data_type=cudnn.data_type.FLOAT)
    try:
        X = g.tensor(name="X", dim=dims, stride=strides, data_type=dtype)
        if op == "relu":
            Y = g.relu(input=X)
        elif op == "add":
            Y = g.add(a=X, b=g.tensor(name="W", dim=[2, 3]))
        elif op == "matmul":
            Y = g.matmul(A=X, B=g.tensor(name="W", dim=[1, 3, 2]))
        elif op == "reduction":
            Y = g.reduction(input=X, mode=cudnn.reduction_mode.ADD)
        else:
            Y = g.softmax(input=X)
        if isinstance(Y, tuple):
            Y = Y[0]
        Y.set_output(True)
        g.build([cudnn.heur_mode.A])
    except Exception as e:  # noqa: BLE001
        check_error(e)
        return
    if execute:
        try:
            n = int(np.prod([max(d, 0) for d in Y.get_dim()])) if Y.get_dim() else 1
            if n > 1 << 16:
                return
            x = np.zeros(max(1, int(np.prod([max(d, 0) for d in X.get_dim()]))), np.float32)
            g.execute({X: x, Y: np.zeros(max(n, 1), np.float32)}, ws(g))
        except Exception as e:  # noqa: BLE001
            check_error(e)
