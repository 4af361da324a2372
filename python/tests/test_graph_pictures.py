"""g.to_dot() and the notebook pictures (_repr_svg_ through Graphviz, DOT text without it)."""

import os
import stat

import numpy as np

import dnngraph as cudnn


def _graph():
    g = cudnn.pygraph(handle=cudnn.create_handle(device="cpu"), name='mm "relu"',
                      io_data_type=cudnn.data_type.FLOAT)
    A = g.tensor(name="A", dim=[1, 2, 3], data_type=cudnn.data_type.FLOAT)
    B = g.tensor(name="B", dim=[1, 3, 4], data_type=cudnn.data_type.FLOAT)
    Y = g.relu(input=g.matmul(A=A, B=B, name="mm"), name="act")
    Y.set_output(True)
    return g


def test_to_dot_shows_ops_tensors_roles_and_inferred_dims():
    g = _graph()
    before = g.to_dot()
    assert 'digraph "mm \\"relu\\""' in before  # the name's quotes escaped
    assert "act::OUT_0\\n[] NOT_SET" in before  # not inferred yet: as written
    g.validate()
    dot = g.to_dot()
    assert "A\\n[1,2,3] FLOAT" in dot and "act::OUT_0\\n[1,2,4] FLOAT" in dot, dot
    assert "matmul 'mm'" in dot and "pointwise 'act'\\nmode=RELU" in dot, dot
    assert dot.count("->") == 5  # A, B -> mm -> C -> act -> OUT_0
    assert 'label="IN_0"' in dot and 'label="C"' in dot
    assert "peripheries=2" in dot and 'style="dashed"' in dot  # output doubled, virtual dashed


def test_svg_through_graphviz_when_present_else_dot_text(tmp_path, monkeypatch):
    g = _graph()
    monkeypatch.setenv("PATH", str(tmp_path))  # no Graphviz
    assert g._repr_svg_() is None
    md = g._repr_markdown_()
    assert md.startswith("```dot\n") and g.to_dot() in md
    fake = tmp_path / "dot"  # a stand-in Graphviz: echoes the DOT inside an <svg>
    fake.write_text("#!/bin/sh\n[ \"$1\" = -Tsvg ] || exit 3\necho '<svg>'; cat; echo '</svg>'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/bin:/usr/bin")
    svg = g._repr_svg_()
    assert svg is not None and svg.startswith("<svg>") and g.to_dot() in svg
    assert g._repr_markdown_() is None
    np.testing.assert_equal(len(svg.splitlines()), len(g.to_dot().splitlines()) + 2)
