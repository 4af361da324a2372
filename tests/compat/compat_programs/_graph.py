"""What every program's graph goes through: the graph with fp32 intermediates and compute, and
the steps after its ops (build, workspace, first execute)."""


def graph(h, io="HALF", **kw):
    """A graph with fp32 intermediates and compute, and I/O data type io (none when None)."""
    cudnn = h.cudnn
    if io is not None:
        kw["io_data_type"] = getattr(cudnn.data_type, io)
    return cudnn.pygraph(handle=h.handle, intermediate_data_type=cudnn.data_type.FLOAT,
                         compute_data_type=cudnn.data_type.FLOAT, **kw)


def build(h, g):
    """Builds g with heuristics A, then the fallback."""
    g.build([h.cudnn.heur_mode.A, h.cudnn.heur_mode.FALLBACK])


def launch(h, g, pack):
    """Executes built g on pack once in a workspace of its own and returns a function that
    executes it again."""
    ws = h.workspace(g)
    g.execute(pack, ws)
    h.sync()
    return lambda: g.execute(pack, ws)


def finish(h, g, pack):
    """build, then launch."""
    build(h, g)
    return launch(h, g, pack)


def chain(*steps):
    """One function that runs each of steps in turn."""
    def run():
        for step in steps:
            step()

    return run
