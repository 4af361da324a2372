// Tensor objects: graph tensors shared with the C++ graph. Setters return the same Python object
// so calls chain (Y.set_output(True).set_data_type(...)). Hash and equality are by identity, so
// tensors work as variant-pack keys.
#include "common.hpp"

namespace dnngraph::py {

namespace {
using Self = nb::pointer_and_handle<ir::TensorAttrs>;

nb::object self_of(const Self& s) { return nb::borrow(s.h); }
}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<ir::TensorAttrs>(m, "Tensor", "A tensor of a graph (created by pygraph methods)")
      .def(
          "set_output",
          [](Self s, bool v) {
            s.p->set_output(v);
            return self_of(s);
          },
          nb::arg("value") = true, "Marks the tensor as an output the user reads (non-virtual).")
      .def(
          "set_is_virtual",
          [](Self s, bool v) {
            s.p->set_is_virtual(v);
            return self_of(s);
          },
          nb::arg("value"))
      .def(
          "set_data_type",
          [](Self s, DataType v) {
            s.p->set_data_type(v);
            return self_of(s);
          },
          nb::arg("data_type"))
      .def(
          "set_dim",
          [](Self s, std::vector<int64_t> v) {
            s.p->set_dim(std::move(v));
            return self_of(s);
          },
          nb::arg("dim"))
      .def(
          "set_stride",
          [](Self s, std::vector<int64_t> v) {
            s.p->set_stride(std::move(v));
            return self_of(s);
          },
          nb::arg("stride"))
      .def(
          "set_uid",
          [](Self s, int64_t v) {
            s.p->set_uid(v);
            return self_of(s);
          },
          nb::arg("uid"))
      .def(
          "set_name",
          [](Self s, std::string v) {
            s.p->set_name(std::move(v));
            return self_of(s);
          },
          nb::arg("name"))
      .def(
          "set_is_pass_by_value",
          [](Self s, bool v) {
            s.p->set_is_pass_by_value(v);
            return self_of(s);
          },
          nb::arg("value"))
      .def(
          "set_ragged_offset",
          [](Self s, std::optional<ir::Tensor> v) {
            s.p->set_ragged_offset(v ? *v : nullptr);
            return self_of(s);
          },
          nb::arg("ragged_offset").none(),
          "The cuDNN frontend's ragged (THD) layout: ragged_offset [b+1,1,1,1] INT32/INT64 holds\n"
          "where each batch item starts (elements x ragged_offset_multiplier). Read by sdpa and\n"
          "sdpa_backward (Q, K, V, O, Stats, dO, dQ, dK, dV), with use_padding_mask. None: dense.")
      .def("get_ragged_offset", [](const ir::TensorAttrs& t) { return t.ragged_offset; })
      .def(
          "set_ragged_offset_multiplier",
          [](Self s, int64_t v) {
            s.p->set_ragged_offset_multiplier(v);
            return self_of(s);
          },
          nb::arg("multiplier"), "Elements per unit of the ragged offsets (default 1).")
      .def("get_ragged_offset_multiplier",
           [](const ir::TensorAttrs& t) { return t.ragged_offset_multiplier; })
      .def(
          "get_uid", [](const ir::TensorAttrs& t) { return t.uid; },
          "The uid (assigned by validate when not set)")
      .def("get_dim", [](const ir::TensorAttrs& t) { return t.dim; })
      .def("get_stride", [](const ir::TensorAttrs& t) { return t.stride; })
      .def("get_data_type", [](const ir::TensorAttrs& t) { return t.data_type; })
      .def("get_name", [](const ir::TensorAttrs& t) { return t.name; })
      .def("get_is_virtual", [](const ir::TensorAttrs& t) { return t.is_virtual; })
      .def("get_is_output", [](const ir::TensorAttrs& t) { return t.is_output; })
      .def("get_is_pass_by_value", [](const ir::TensorAttrs& t) { return t.is_pass_by_value; })
      .def("__repr__", [](const ir::TensorAttrs& t) {
        std::string s = "<dnngraph.Tensor " + t.describe();
        if (t.uid_assigned) s += " uid=" + std::to_string(t.uid);
        if (t.is_virtual) s += " virtual";
        if (t.is_pass_by_value) s += " pass-by-value";
        return s + ">";
      });
}

}  // namespace dnngraph::py
