// Device properties and deviceless handles (dnngraph/engines/device_properties.hpp): the
// frontend's create_device_properties / DeviceProperties.serialize / deserialize, and
// create_deviceless_handle, on which pygraph builds ahead of time.
#include <nanobind/stl/string_view.h>

#include "common.hpp"

namespace dnngraph::py {

namespace {

// The Python object: empty until created from a device or deserialize()d.
struct PyDeviceProperties {
  DevicePropertiesPtr props;
  const DeviceProperties& get() const {
    if (!props)
      throw nb::value_error(
          "DeviceProperties: empty; make them with create_device_properties(device_id) or "
          "deserialize() the JSON text serialize() gave");
    return *props;
  }
};

// The JSON text from a str, bytes or list of byte values (the frontend's serialized forms).
std::string text_of(nb::handle data) {
  if (nb::isinstance<nb::str>(data)) return nb::cast<std::string>(data);
  if (nb::isinstance<nb::bytes>(data)) {
    nb::bytes b = nb::borrow<nb::bytes>(data);
    return std::string(b.c_str(), b.size());
  }
  if (nb::isinstance<nb::list>(data) || nb::isinstance<nb::tuple>(data)) {
    std::string s;
    for (nb::handle v : data) s += static_cast<char>(nb::cast<int>(v));
    return s;
  }
  throw nb::type_error(
      "DeviceProperties.deserialize: expected the JSON text as str, bytes or a list of byte "
      "values");
}

}  // namespace

void bind_device_properties(nb::module_& m) {
  nb::class_<PyDeviceProperties>(m, "DeviceProperties",
                                 "What a GPU is, as cuDNN describes it: the target of a "
                                 "deviceless (ahead-of-time) build")
      .def(nb::init<>())
      .def(
          "serialize", [](const PyDeviceProperties& p) { return p.get().to_json(); },
          "The properties as cuDNN's JSON text.")
      .def(
          "deserialize",
          [](PyDeviceProperties& p, nb::handle data) {
            p.props = unwrap(DeviceProperties::from_json(text_of(data)));
          },
          nb::arg("data"),
          "Replaces these properties with those of a serialize()d JSON text (str, bytes or a "
          "list of byte values). ValueError, naming the field, when it does not parse.")
      .def_prop_ro("device_name", [](const PyDeviceProperties& p) { return p.get().device_name(); })
      .def_prop_ro("compute_capability",
                   [](const PyDeviceProperties& p) { return p.get().compute_capability(); })
      .def_prop_ro("sm_count", [](const PyDeviceProperties& p) { return p.get().sm_count(); })
      .def_prop_ro("device_id", [](const PyDeviceProperties& p) { return p.get().device_id(); })
      .def("__repr__", [](const PyDeviceProperties& p) {
        return p.props ? "<dnngraph.DeviceProperties " + p.props->describe() + ">"
                       : std::string("<dnngraph.DeviceProperties (empty)>");
      });

  m.def(
      "create_device_properties",
      [](int device_id) {
        PyDeviceProperties p;
        p.props = unwrap(DeviceProperties::from_device(device_id));
        return p;
      },
      nb::arg("device_id") = 0,
      "The properties of CUDA device `device_id` as cuDNN reads them (needs that GPU and "
      "cuDNN >= 9.8). serialize() them there to build for that GPU elsewhere.");
  m.def(
      "create_deviceless_handle",
      [](const PyDeviceProperties& p) {
        auto h = std::make_shared<PyHandle>();
        h->handle = unwrap(Handle::create_deviceless(p.props ? p.props : DevicePropertiesPtr{}));
        return h;
      },
      nb::arg("device_properties"),
      "A handle without a GPU that plans for the GPU `device_properties` describe: graphs built "
      "on it serialize, and execute after deserialize() with a handle on such a GPU.");
}

}  // namespace dnngraph::py
