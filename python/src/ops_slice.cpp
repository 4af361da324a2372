// slice: the cuDNN frontend's graph.slice(input, slices) with a list of Python slice objects.
#include "common.hpp"

namespace dnngraph::py {

namespace {
constexpr DataType kNotSet = DataType::NotSet;

// Python slice objects -> SliceAttrs. With X's dims known, negative and missing bounds resolve
// as in Python (slice.indices) and dims beyond the list are taken whole; otherwise start and
// stop must be given as non-negative integers, one slice per dim.
ir::SliceAttrs slice_attrs(const ir::Tensor& x, const nb::list& slices) {
  const std::vector<int64_t>& dim = x->dim;
  if (!dim.empty() && nb::len(slices) > dim.size())
    throw nb::value_error(("slice: " + std::to_string(nb::len(slices)) + " slices for input '" +
                           x->name + "' of rank " + std::to_string(dim.size()))
                              .c_str());
  ir::SliceAttrs a;
  for (size_t d = 0; d < nb::len(slices); ++d) {
    nb::handle s = slices[d];
    if (!PySlice_Check(s.ptr()))
      throw nb::type_error(("slice: element " + std::to_string(d) +
                            " of slices must be a Python slice (e.g. slice(0, 4))")
                               .c_str());
    Py_ssize_t start = 0, stop = 0, step = 0;
    if (PySlice_Unpack(s.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
    if (step <= 0)
      throw nb::value_error(("slice: dim " + std::to_string(d) + " has step " +
                             std::to_string(step) + "; steps must be 1 or more")
                                .c_str());
    if (!dim.empty()) {
      PySlice_AdjustIndices(static_cast<Py_ssize_t>(dim[d]), &start, &stop, step);
    } else {
      nb::object py_start = s.attr("start"), py_stop = s.attr("stop");
      if (py_stop.is_none() || start < 0 || stop < 0)
        throw nb::value_error(("slice: the dims of input '" + x->name +
                               "' are not known yet, so dim " + std::to_string(d) +
                               " needs explicit non-negative start and stop")
                                  .c_str());
    }
    a.start.push_back(start);
    a.end.push_back(stop);
    a.stride.push_back(step);
  }
  for (size_t d = a.start.size(); d < dim.size(); ++d) {
    a.start.push_back(0);
    a.end.push_back(dim[d]);
    a.stride.push_back(1);
  }
  return a;
}

}  // namespace

void bind_op_slice(nb::class_<PyGraph>& cls) {
  cls.def(
      "slice",
      [](PyGraph& g, ir::Tensor input, nb::list slices, DataType compute, std::string name) {
        return g.graph.slice(input, slice_attrs(input, slices),
                             op_options(compute, std::move(name)));
      },
      nb::arg("input"), nb::arg("slices"), nb::arg("compute_data_type") = kNotSet,
      nb::arg("name") = "",
      "Y = input[slices]: one Python slice per dim (start:stop:step, step >= 1; with input's "
      "dims known, negative and omitted bounds work as in Python and trailing dims may be "
      "omitted). Y is packed and keeps input's data type.");
}

}  // namespace dnngraph::py
